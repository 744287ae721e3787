// A model file that is not what the forward pass needs gets one clear error
// naming the file and everything that is wrong.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;

namespace {

using llmserve::testing::TempFile;

// Copies `src` into the file `out`, letting `edit` drop tensors or change metadata.
void rewrite(const std::string& src, const std::string& out,
             const std::function<bool(const std::string&)>& keep_tensor,
             const std::function<void(gguf::Writer&)>& edit = {}) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  for (const auto& t : f.tensors())
    if (keep_tensor(t.name)) w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  if (edit) edit(w);
  w.write(out);
}

std::string tiny_model() {
  static const TempFile file("tiny.gguf", [](const std::string& p) {
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
  const TempFile file("missing.gguf", [](const std::string& out) {
    rewrite(tiny_model(), out, [](const std::string& n) {
      return n != "blk.1.attn_k.weight" && n != "output_norm.weight";
    });
  });
  const std::string& p = file.path();
  const std::string e = load_error(p);
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor blk.1.attn_k.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor output_norm.weight"), std::string::npos) << e;
}

TEST(ModelErrors, UnknownArchitectureIsNamed) {
  const TempFile file("arch.gguf", [](const std::string& out) {
    rewrite(tiny_model(), out, [](const std::string&) { return true; },
            [](gguf::Writer& w) { w.set("general.architecture", gguf::make_string("gptx")); });
  });
  const std::string e = load_error(file.path());
  EXPECT_NE(e.find("unsupported architecture 'gptx'"), std::string::npos) << e;
}

TEST(ModelErrors, MissingHyperparameterIsNamed) {
  const gguf::File f = gguf::File::open(tiny_model());
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata())
    if (k != "llama.block_count") w.set(k, v);
  const TempFile file("no-layers.gguf", [&w](const std::string& out) { w.write(out); });
  const std::string e = load_error(file.path());
  EXPECT_NE(e.find("missing metadata key llama.block_count"), std::string::npos) << e;
}

TEST(ModelErrors, HeadCountsMustDivide) {
  const TempFile file("heads.gguf", [](const std::string& out) {
    rewrite(tiny_model(), out, [](const std::string&) { return true; },
            [](gguf::Writer& w) { w.set("llama.attention.head_count_kv", gguf::make_u32(3)); });
  });
  const std::string e = load_error(file.path());
  EXPECT_NE(e.find("not a multiple of head_count_kv 3"), std::string::npos) << e;
}
