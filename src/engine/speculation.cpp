#include "engine/speculation.h"

#include "core/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/ngram_proposer.h"
#include "gguf/types.h"

namespace llmserve::engine {

namespace {

gguf::TensorType draft_type(const std::string& name) {
  const auto t = gguf::type_info_by_name(name);
  if (!t || (t->type != gguf::TensorType::Q4_0 && t->type != gguf::TensorType::Q8_0))
    throw Error("--draft-quant must be q4_0 or q8_0, not '" + name + "'");
  return t->type;
}

}  // namespace

void validate(const SpeculationOptions& o) {
  if (o.method != "off" && o.method != "ngram" && o.method != "draft" && o.method != "self")
    throw Error("--spec must be off, ngram, draft or self, not '" + o.method + "'");
  if (o.k < 1 || o.k > 16) throw Error("--spec-k must be in 1..16, not " + std::to_string(o.k));
  if (o.method == "draft" && o.draft_model.empty()) throw Error("--spec draft needs --draft-model FILE");
  if (o.method != "draft" && !o.draft_model.empty())
    throw Error("--draft-model is used by --spec draft only (--spec is " + o.method + ")");
  draft_type(o.draft_quant);
}

Speculation::Speculation(const SpeculationOptions& options, const model::LoadedModel& target, ThreadPool& pool,
                         const model::InstanceConfig& draft_config)
    : options_(options) {
  validate(options_);
  if (options_.method == "ngram") proposer_ = std::make_unique<NgramProposer>();
  if (options_.method == "draft" || options_.method == "self") {
    model::InstanceConfig c = draft_config;
    if (options_.method == "self") c.requantize = draft_type(options_.draft_quant);
    draft_ = model::LoadedModel::load(options_.method == "self" ? target.path() : options_.draft_model, pool, c);
    check_same_vocabulary(target, *draft_);
    proposer_ = std::make_unique<DraftModelProposer>(*draft_);
  }
}

Speculation::~Speculation() = default;

SpecConfig Speculation::config() const {
  return {.proposer = proposer_.get(), .max_k = options_.k, .adaptive = options_.adaptive, .cost = {}};
}

}  // namespace llmserve::engine
