#include "gateway/semantic_index.h"

#include <algorithm>

namespace llmserve::gateway {

float dot(const float* a, const float* b, size_t n) {
  // Eight independent sums, so the compiler keeps them in vector lanes.
  constexpr size_t kLanes = 8;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (const float v : acc) sum += v;
  return sum;
}

size_t SemanticIndex::add(std::span<const float> unit_vector, uint64_t id, TimePoint expires) {
  rows_.insert(rows_.end(), unit_vector.begin(), unit_vector.end());
  ids_.push_back(id);
  expires_.push_back(expires);
  return ids_.size() - 1;
}

std::optional<uint64_t> SemanticIndex::remove(size_t row) {
  const size_t last = ids_.size() - 1;
  std::optional<uint64_t> moved;
  if (row != last) {
    std::copy_n(rows_.begin() + last * dims_, dims_, rows_.begin() + row * dims_);
    ids_[row] = ids_[last];
    expires_[row] = expires_[last];
    moved = ids_[row];
  }
  rows_.resize(last * dims_);
  ids_.pop_back();
  expires_.pop_back();
  return moved;
}

std::optional<SemanticIndex::Match> SemanticIndex::nearest(std::span<const float> query, float tau,
                                                           TimePoint now) const {
  std::optional<Match> best;
  for (size_t row = 0; row < ids_.size(); ++row) {
    const float sim = dot(rows_.data() + row * dims_, query.data(), dims_);
    if (sim < tau || (best && sim <= best->similarity) || expires_[row] <= now) continue;
    best = Match{ids_[row], sim};
  }
  return best;
}

}  // namespace llmserve::gateway
