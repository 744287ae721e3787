// llmserve gen-model: a random-weight model of a real architecture's shape.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "model/synthetic.h"

namespace llmserve::cli {

namespace {

struct GenModelOptions {
  std::string shape;
  std::string type = "q8_0";
  uint64_t seed = 0;
  std::string vocab_from;
  std::string out;
};

void run_gen_model(const GenModelOptions& o) {
  model::SyntheticSpec spec;
  const auto shape = model::find_shape(o.shape);
  if (!shape) {
    std::string names;
    for (const auto n : model::shape_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    throw Error("unknown shape '" + o.shape + "' (known: " + names + ")");
  }
  spec.shape = *shape;
  std::string name = o.type;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  spec.q4_k_m = name == "q4_k_m";
  const auto type = gguf::type_info_by_name(spec.q4_k_m ? "q4_k" : name);
  using T = gguf::TensorType;
  if (!type || (type->type != T::F32 && type->type != T::F16 && type->type != T::BF16 && type->type != T::Q8_0 &&
                 type->type != T::Q4_0 && type->type != T::Q4_K && type->type != T::Q6_K))
    throw Error("unsupported --type '" + o.type + "' (use f32, f16, bf16, q8_0, q4_0, q4_k, q6_k or q4_k_m)");
  spec.type = type->type;
  spec.seed = o.seed;
  spec.vocab_from = o.vocab_from;
  model::write_synthetic_model(spec, o.out);
  std::fprintf(stderr, "wrote %s (shape %s, type %s, seed %lu; random weights)\n", o.out.c_str(), o.shape.c_str(),
               o.type.c_str(), static_cast<unsigned long>(o.seed));
}

}  // namespace

void add_gen_model(CLI::App& app) {
  auto o = std::make_shared<GenModelOptions>();
  CLI::App* cmd = app.add_subcommand("gen-model", "Write a random-weight model of a real architecture's shape");
  cmd->add_option("--shape", o->shape, "tiny, stories110m, tinyllama-1.1b or smollm-135m")->required();
  cmd->add_option("--type", o->type, "f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, or q4_k_m (llama.cpp's Q4_K / Q6_K mix)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("--vocab-from", o->vocab_from, "Copy the tokenizer of this GGUF file");
  cmd->add_option("-o,--output", o->out, "Output GGUF file")->required();
  cmd->callback([o] { run_gen_model(*o); });
}

}  // namespace llmserve::cli
