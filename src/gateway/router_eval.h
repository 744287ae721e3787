#pragma once
// Scoring the complexity router on a labeled set (llmserve router-eval).
// Quality per label: the large model answers every prompt well (1); the
// small model answers an "easy" prompt well (1) and a "hard" one badly (0).
// APGR is RouteLLM's average performance gap recovered: the share of the
// gap between all-small and all-large quality that routing the k
// highest-scoring prompts to the large model recovers, averaged over the
// share of large-model calls k / N from 0 to 1 (a random router: 0.5).
#include <string>
#include <vector>

namespace llmserve::gateway {

struct LabeledPrompt {
  std::string text;    // "prompt", or the "messages" contents joined by newlines
  int turns = 1;       // messages; 1 for a prompt
  int max_tokens = 0;  // 0: not given
  bool hard = false;   // label "hard": the large model should answer; "easy": the small one
};

// JSONL: {"label": "easy"|"hard", "prompt": TEXT | "messages": [{"role", "content"}], "max_tokens"?: N}.
// Throws Error naming the file and line.
std::vector<LabeledPrompt> read_labeled_prompts(const std::string& path);

// Every fourth line (index 3, 7, ...) is held out: scripts/fit_router.py
// fits the weights on the others.
inline bool held_out(size_t index) { return index % 4 == 3; }

struct ScoredPrompt {
  double score = 0;
  bool hard = false;
  double small_ms = 0;  // answering it with the small model
  double large_ms = 0;  // with the large one
  double probe_ms = 0;  // the small model's prefill for the score: paid again when it goes to the large model
};

// The lowest threshold that sends at most `share` of the prompts to the
// large model (ties stay together).
double threshold_for_share(const std::vector<ScoredPrompt>& prompts, double share);

struct RouterEval {
  double accuracy = 0;     // decisions that match the label
  double large_share = 0;  // prompts sent to the large model
  double cost_ms = 0;      // per request: the router's (probe included)
  double small_cost_ms = 0, large_cost_ms = 0;  // per request: every prompt to one model
  double quality = 0;         // mean quality of the routed answers
  double random_quality = 0;  // a random router's at the same cost per request
  double apgr = 0;
};

// Throws Error for an empty set.
RouterEval evaluate_router(const std::vector<ScoredPrompt>& prompts, double threshold);

}  // namespace llmserve::gateway
