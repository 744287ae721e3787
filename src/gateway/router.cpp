#include "gateway/router.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gateway/router_weights.h"

namespace llmserve::gateway {

double route_score(const RouteFeatures& features) {
  double z = kRouterBias;
  for (size_t i = 0; i < features.size(); ++i) z += kRouterWeights[i] * features[i];
  return 1.0 / (1.0 + std::exp(-z));
}

Router::Router(RouterConfig config, const std::vector<std::string>& served) : config_(std::move(config)) {
  auto is_served = [&](const std::string& name) { return std::find(served.begin(), served.end(), name) != served.end(); };
  if (config_.small.empty() || config_.large.empty())
    throw Error("the router needs both --router-small and --router-large");
  if (served.size() < 2) throw Error("the router needs two served models (--model NAME=FILE, twice); this server serves one");
  for (const auto& [flag, name] : {std::pair{"--router-small", &config_.small}, std::pair{"--router-large", &config_.large}})
    if (!is_served(*name)) throw Error(std::string(flag) + ": no served model is named '" + *name + "'");
  if (config_.small == config_.large) throw Error("--router-small and --router-large both name '" + config_.small + "'");
  if (config_.name.empty()) throw Error("--router-name must not be empty");
  if (is_served(config_.name)) throw Error("--router-name '" + config_.name + "' is also a served model's name");
  if (!(config_.threshold >= 0 && config_.threshold <= 1))
    throw Error("--router-threshold must be between 0 and 1, not " + std::to_string(config_.threshold));
}

}  // namespace llmserve::gateway
