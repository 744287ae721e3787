#pragma once
// Turns a prompt's text into a vector for the semantic cache layer. The
// cache normalizes what it gets, so an embedder need not.
#include <string_view>
#include <vector>

namespace llmserve::gateway {

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual std::vector<float> embed(std::string_view text) const = 0;
};

}  // namespace llmserve::gateway
