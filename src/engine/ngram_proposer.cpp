#include "engine/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace llmserve::engine {

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n)
    throw Error("n-gram proposer: need 1 <= min n <= max n, got " + std::to_string(min_n) + ".." + std::to_string(max_n));
}

void NgramProposer::propose(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests) {
    r.out->q.clear();
    ngram_lookup(r.tokens, min_n_, max_n_, r.k, r.out->tokens);
  }
}

void ngram_lookup(std::span<const int32_t> tokens, int min_n, int max_n, int k, std::vector<int32_t>& out) {
  out.clear();
  const int len = static_cast<int>(tokens.size());
  if (k <= 0) return;
  for (int n = std::min(max_n, len - 1); n >= min_n; --n) {
    const auto pattern = tokens.last(static_cast<size_t>(n));
    // Latest earlier occurrence that is followed by at least one token.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::ranges::equal(tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(n)), pattern)) continue;
      const int from = start + n, to = std::min(len, from + k);
      out.assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

}  // namespace llmserve::engine
