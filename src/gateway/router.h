#pragma once
// The complexity router: a request that names the router's model ("auto")
// goes to the large model when a logistic score of its features
// (route_features.h; weights in router_weights.h, fitted offline by
// scripts/fit_router.py) reaches the threshold, else to the small one.
#include <string>
#include <string_view>
#include <vector>

#include "gateway/route_features.h"

namespace llmserve::gateway {

struct RouterConfig {
  std::string name = "auto";  // the "model" a request names to be routed
  std::string small, large;   // served model names; both empty: no router
  double threshold = 0.5;     // score at or above it: the large model
  bool enabled() const { return !small.empty() || !large.empty(); }
};

// The probability, by the built-in weights, that a request needs the large model.
double route_score(const RouteFeatures& features);

class Router {
 public:
  // Throws Error naming the flag at fault: one of small / large missing,
  // either not among `served`, both the same, the name shadowing a served
  // model, fewer than two served models, a threshold outside [0, 1].
  Router(RouterConfig config, const std::vector<std::string>& served);

  const RouterConfig& config() const { return config_; }
  bool routes(std::string_view requested) const { return requested == config_.name; }
  // The served model name for a request with this score.
  const std::string& choose(double score) const { return score >= config_.threshold ? config_.large : config_.small; }

 private:
  RouterConfig config_;
};

}  // namespace llmserve::gateway
