#pragma once
// Speculative decoding as a user configures it (serve / generate / bench
// flags): which proposer, how many draft tokens, and the draft model it
// needs, built next to the target model it serves.
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "model/instance.h"

namespace llmserve::engine {

struct SpeculationOptions {
  std::string method = "off";  // off | ngram | draft | self
  int k = 4;                   // draft tokens per step at most (--spec-k)
  bool adaptive = true;        // choose k per sequence and step; off: always k
  std::string draft_model;     // --draft-model FILE (method draft)
  std::string draft_quant = "q4_0";  // --draft-quant (method self): q4_0 or q8_0
};

// Throws Error naming the flag that is wrong (--spec, --spec-k, ...).
void validate(const SpeculationOptions& options);

// The proposer and, for draft and self, the draft model with its own KV
// pool (`draft_config`), on the target's thread pool.
class Speculation {
 public:
  // Throws Error: a bad option, a draft file that does not load, a draft
  // whose vocabulary is not the target's.
  Speculation(const SpeculationOptions& options, const model::LoadedModel& target, ThreadPool& pool,
              const model::InstanceConfig& draft_config);
  ~Speculation();
  bool enabled() const { return proposer_ != nullptr; }
  // For EngineConfig::spec (cost empty: the engine measures it).
  SpecConfig config() const;
  const model::LoadedModel* draft() const { return draft_.get(); }

 private:
  SpeculationOptions options_;
  std::unique_ptr<model::LoadedModel> draft_;
  std::unique_ptr<Proposer> proposer_;
};

}  // namespace llmserve::engine
