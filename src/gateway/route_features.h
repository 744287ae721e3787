#pragma once
// What the complexity router knows of a request, as numbers: its size and
// shape, how much code, math and reasoning its text asks for, and how unsure
// the small model is of the token after the prompt.
#include <array>
#include <string_view>

namespace llmserve::gateway {

struct RouteRequest {
  std::string_view text;  // the prompt, or the chat messages' contents one after another
  int prompt_tokens = 0;  // in the small model's vocabulary
  int turns = 1;          // chat messages; 1 for a plain prompt
  int max_tokens = 0;     // as the request asks; 0: not given
  double entropy = 0;     // the small model's next-token distribution after the prompt, nats
  double margin = 0;      // its best logprob minus its second best
};

inline constexpr size_t kRouteFeatureCount = 11;
using RouteFeatures = std::array<double, kRouteFeatureCount>;

// Names in feature order (CSV headers, the weights file's comments).
extern const std::array<std::string_view, kRouteFeatureCount> kRouteFeatureNames;

RouteFeatures route_features(const RouteRequest& r);

}  // namespace llmserve::gateway
