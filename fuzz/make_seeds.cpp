// Writes small, valid GGUF files into a directory as a seed corpus for
// gguf_fuzzer: every value type, nested arrays, each tensor type and a few
// alignments, so mutations start from inputs that reach deep into the reader.
//   gguf_fuzz_seeds <dir>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/quant.h"
#include "gguf/writer.h"

namespace {

using namespace llmserve::gguf;

void add_metadata(Writer& w) {
  w.set("general.architecture", make_string("llama"));
  w.set("llama.block_count", make_u32(1));
  w.set("llama.attention.layer_norm_rms_epsilon", make_f32(1e-5f));
  w.set("i8", Value{ValueType::INT8, int64_t{-3}});
  w.set("u16", Value{ValueType::UINT16, uint64_t{700}});
  w.set("i64", Value{ValueType::INT64, int64_t{-1}});
  w.set("f64", Value{ValueType::FLOAT64, 2.5});
  w.set("flag", make_bool(true));
  w.set("tokenizer.ggml.tokens", make_array(ValueType::STRING, {make_string("<unk>"), make_string("\xe2\x96\x81the")}));
  w.set("tokenizer.ggml.scores", make_array(ValueType::FLOAT32, {make_f32(0), make_f32(-1)}));
  w.set("nested", make_array(ValueType::ARRAY, {make_array(ValueType::INT32, {make_i32(1)}),
                                               make_array(ValueType::UINT8, {})}));
}

// One row per tensor type, filled with a ramp so the decoders see varied bytes.
void add_tensor_of(Writer& w, TensorType type, uint64_t cols, uint64_t rows) {
  const auto info = type_info(type);
  std::vector<uint8_t> data(row_bytes(type, cols) * rows);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 37 + 11);
  w.add_tensor(std::string(info->name) + ".weight", {cols, rows}, type, std::move(data));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    const TensorType types[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0,
                                TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                                TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
    for (TensorType t : types) {
      Writer w;
      w.set("general.alignment", make_u32(32));
      add_tensor_of(w, t, t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K ? 256 : 64, 2);
      w.write(dir + "/" + std::string(type_info(t)->name) + ".gguf");
    }
    Writer all;
    add_metadata(all);
    for (TensorType t : types) add_tensor_of(all, t, 256, 1);
    all.write(dir + "/all.gguf");
    for (uint32_t alignment : {8u, 64u, 256u}) {
      Writer w;
      w.set("general.alignment", make_u32(alignment));
      add_tensor_of(w, TensorType::F32, 3, 1);
      add_tensor_of(w, TensorType::Q8_0, 32, 1);
      w.write(dir + "/align" + std::to_string(alignment) + ".gguf");
    }
    Writer meta_only;
    add_metadata(meta_only);
    meta_only.write(dir + "/metadata.gguf");
  } catch (const llmserve::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
