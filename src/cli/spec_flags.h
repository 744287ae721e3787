#pragma once
// The speculative-decoding flags serve, generate and bench share.
#include <CLI/CLI.hpp>

#include "engine/speculation.h"

namespace llmserve::cli {

inline void add_spec_flags(CLI::App* cmd, engine::SpeculationOptions& o) {
  cmd->add_option("--spec", o.method,
                  "Speculative decoding: off, ngram (prompt lookup), draft (--draft-model) or self "
                  "(the model's own weights as --draft-quant)")
      ->capture_default_str();
  cmd->add_option("--spec-k", o.k, "Draft tokens per step at most (1-16)")->capture_default_str();
  cmd->add_option("--draft-model", o.draft_model, "Draft model for --spec draft: a GGUF with the model's vocabulary");
  cmd->add_option("--draft-quant", o.draft_quant, "Self-draft weights: q4_0 or q8_0")->capture_default_str();
}

}  // namespace llmserve::cli
