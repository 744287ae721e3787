// A model file that is not what the forward pass needs gets one clear error
// naming the file and everything that is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;

namespace {

using llmserve::testing::temp_path;

// Copies `src` into a new file, letting `edit` drop tensors or change metadata.
std::string rewrite(const std::string& src, const std::string& name,
                    const std::function<bool(const std::string&)>& keep_tensor,
                    const std::function<void(gguf::Writer&)>& edit = {}) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  for (const auto& t : f.tensors())
    if (keep_tensor(t.name)) w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  if (edit) edit(w);
  const std::string out = temp_path(name);
  w.write(out);
  return out;
}

std::string tiny_model() {
  static const llmserve::testing::TempFile file("tiny.gguf", [](const std::string& p) {
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    spec.type = gguf::TensorType::F32;
    model::write_synthetic_model(spec, p);
  });
  return file.path();
}

std::string load_error(const std::string& path) {
  try {
    model::Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ModelErrors, MissingFileNamesThePath) {
  EXPECT_NE(load_error("/nonexistent/model.gguf").find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(ModelErrors, MissingTensorsAreAllListed) {
  const std::string p = rewrite(tiny_model(), "missing.gguf", [](const std::string& n) {
    return n != "blk.1.attn_k.weight" && n != "output_norm.weight";
  });
  const std::string e = load_error(p);
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor blk.1.attn_k.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor output_norm.weight"), std::string::npos) << e;
  std::filesystem::remove(p);
}

TEST(ModelErrors, UnknownArchitectureIsNamed) {
  const std::string p = rewrite(tiny_model(), "arch.gguf", [](const std::string&) { return true; },
                                [](gguf::Writer& w) { w.set("general.architecture", gguf::make_string("gptx")); });
  const std::string e = load_error(p);
  EXPECT_NE(e.find("unsupported architecture 'gptx'"), std::string::npos) << e;
  std::filesystem::remove(p);
}

TEST(ModelErrors, MissingHyperparameterIsNamed) {
  const gguf::File f = gguf::File::open(tiny_model());
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata())
    if (k != "llama.block_count") w.set(k, v);
  const std::string p = temp_path("no-layers.gguf");
  w.write(p);
  const std::string e = load_error(p);
  EXPECT_NE(e.find("missing metadata key llama.block_count"), std::string::npos) << e;
  std::filesystem::remove(p);
}

TEST(ModelErrors, HeadCountsMustDivide) {
  const std::string p = rewrite(tiny_model(), "heads.gguf", [](const std::string&) { return true; },
                                [](gguf::Writer& w) { w.set("llama.attention.head_count_kv", gguf::make_u32(3)); });
  const std::string e = load_error(p);
  EXPECT_NE(e.find("not a multiple of head_count_kv 3"), std::string::npos) << e;
  std::filesystem::remove(p);
}
