#pragma once
// The model-free embedder: hashed character n-grams. The text is lowercased
// (ASCII), every run of characters other than ASCII letters and digits
// becomes one space (bytes of other UTF-8 characters are kept), and a space
// pads both ends. Each n-gram of bytes (min_n..max_n) is hashed to one of
// `dims` slots with a sign from the hash; a slot gets 1 + ln(count) per
// n-gram; the result is L2-normalized.
#include <string>

#include "gateway/embedder.h"

namespace llmserve::gateway {

struct NgramConfig {
  int min_n = 3;
  int max_n = 5;
  int dims = 1024;
};

class NgramEmbedder : public Embedder {
 public:
  explicit NgramEmbedder(NgramConfig config = {});  // throws Error for a config that cannot work
  std::vector<float> embed(std::string_view text) const override;

  // The text the n-grams are taken from (exposed for tests).
  static std::string normalize(std::string_view text);

 private:
  NgramConfig config_;
};

}  // namespace llmserve::gateway
