#include "gateway/router_eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gateway/json_lines.h"

namespace llmserve::gateway {

namespace {

LabeledPrompt parse_line(const nlohmann::json& line, const std::string& where) {
  LabeledPrompt p;
  const auto label = line.find("label");
  if (label == line.end() || !label->is_string() || (*label != "easy" && *label != "hard"))
    throw Error(where + "\"label\" must be \"easy\" or \"hard\"");
  p.hard = *label == "hard";
  const auto prompt = line.find("prompt"), messages = line.find("messages");
  if ((prompt == line.end()) == (messages == line.end())) throw Error(where + "give \"prompt\" or \"messages\", one of them");
  if (prompt != line.end()) {
    if (!prompt->is_string() || prompt->get_ref<const std::string&>().empty())
      throw Error(where + "\"prompt\" must be a non-empty string");
    p.text = prompt->get<std::string>();
  } else {
    if (!messages->is_array() || messages->empty()) throw Error(where + "\"messages\" must be a non-empty array");
    for (const auto& m : *messages) {
      const auto content = m.is_object() ? m.find("content") : m.end();
      if (!m.is_object() || !m.contains("role") || content == m.end() || !content->is_string())
        throw Error(where + "each message needs \"role\" and a string \"content\"");
      if (!p.text.empty()) p.text += '\n';
      p.text += content->get_ref<const std::string&>();
    }
    p.turns = static_cast<int>(messages->size());
  }
  if (const auto max_tokens = line.find("max_tokens"); max_tokens != line.end()) {
    if (!max_tokens->is_number_integer() || *max_tokens < 1) throw Error(where + "\"max_tokens\" must be a positive integer");
    p.max_tokens = max_tokens->get<int>();
  }
  return p;
}

}  // namespace

std::vector<LabeledPrompt> read_labeled_prompts(const std::string& path) {
  std::vector<LabeledPrompt> prompts;
  for_each_json_line(path, [&](const nlohmann::json& line, const std::string& where) { prompts.push_back(parse_line(line, where)); });
  if (prompts.empty()) throw Error(path + ": no prompts");
  return prompts;
}

double threshold_for_share(const std::vector<ScoredPrompt>& prompts, double share) {
  std::vector<double> scores;
  for (const ScoredPrompt& p : prompts) scores.push_back(p.score);
  std::sort(scores.rbegin(), scores.rend());
  const size_t allowed = static_cast<size_t>(share * static_cast<double>(scores.size()) + 1e-9);
  // Scores above the cut go large; the cut is the highest score that would
  // push past the allowed count, so everything tied with it stays small.
  if (allowed >= scores.size()) return 0.0;  // scores are probabilities: all of them
  return std::nextafter(scores[allowed], 2.0);
}

RouterEval evaluate_router(const std::vector<ScoredPrompt>& prompts, double threshold) {
  if (prompts.empty()) throw Error("no prompts to evaluate the router on");
  const double n = static_cast<double>(prompts.size());
  RouterEval e;
  double hard = 0;
  for (const ScoredPrompt& p : prompts) {
    const bool large = p.score >= threshold;
    e.accuracy += large == p.hard;
    e.large_share += large;
    e.cost_ms += large ? p.large_ms + p.probe_ms : p.small_ms;
    e.small_cost_ms += p.small_ms;
    e.large_cost_ms += p.large_ms;
    e.quality += large || !p.hard;
    hard += p.hard;
  }
  for (double* v : {&e.accuracy, &e.large_share, &e.cost_ms, &e.small_cost_ms, &e.large_cost_ms, &e.quality}) *v /= n;
  // A random router spending the same sends this share to the large model.
  const double spread = e.large_cost_ms - e.small_cost_ms;
  const double random_share = spread > 0 ? std::clamp((e.cost_ms - e.small_cost_ms) / spread, 0.0, 1.0) : e.large_share;
  const double small_quality = 1.0 - hard / n;
  e.random_quality = small_quality + random_share * (hard / n);

  // Recovered gap after sending the k best-scoring prompts large, k = 0..N, by the trapezoid rule over k / N.
  std::vector<const ScoredPrompt*> order;
  for (const ScoredPrompt& p : prompts) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ScoredPrompt* a, const ScoredPrompt* b) { return a->score > b->score; });
  if (hard == 0) {
    e.apgr = 1;  // no gap to recover
    return e;
  }
  double recovered = 0, area = 0;
  for (const ScoredPrompt* p : order) {
    const double before = recovered / hard;
    recovered += p->hard;
    area += (before + recovered / hard) / 2;
  }
  e.apgr = area / n;
  return e;
}

}  // namespace llmserve::gateway
