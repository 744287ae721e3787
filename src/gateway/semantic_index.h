#pragma once
// The semantic layer's store for one namespace: embeddings quantized to int8
// codes (each row scaled so its largest value is +-127) as the rows of one
// contiguous matrix, each with its entry's id and expiry. nearest() is a
// flat scan of integer dot products, a quarter of the bytes float rows
// would read; removing a row moves the last row into its place.
// Similarity is the cosine of the quantized vectors (within ~0.01 of the
// exact cosine), and that is what `similarity >= tau` compares.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace llmserve::gateway {

using TimePoint = std::chrono::steady_clock::time_point;

// Throws Error unless `embedding` can be indexed: at most
// SemanticIndex::kMaxDims values, all finite.
void check_embedding(std::span<const float> embedding);

// What SemanticIndex compares with tau for two embeddings: the cosine of
// their int8 codes; 0 when either is all zeros. Throws Error unless both
// have one length and pass check_embedding.
float similarity(std::span<const float> a, std::span<const float> b);

class SemanticIndex {
 public:
  // The most dims whose int32 dot products cannot overflow (127 * 127 each).
  static constexpr size_t kMaxDims = size_t{1} << 17;

  explicit SemanticIndex(size_t dims) : dims_(dims) {}  // dims <= kMaxDims

  size_t dims() const { return dims_; }
  size_t size() const { return ids_.size(); }
  // The bytes a row of `dims` takes: its codes, norm, id and expiry.
  static size_t row_bytes(size_t dims);

  // Appends a row (embedding.size() == dims(); only its direction counts);
  // returns its index.
  size_t add(std::span<const float> embedding, uint64_t id, TimePoint expires);
  // Removes `row`; returns the id of the row moved into its place, if any.
  std::optional<uint64_t> remove(size_t row);

  struct Match {
    uint64_t id = 0;
    float similarity = 0;
  };
  struct Nearest {
    std::optional<Match> match;     // the most similar row with similarity >= tau, not expired
    std::vector<uint64_t> expired;  // the ids of rows expired at `now`, for the owner to remove
  };
  Nearest nearest(std::span<const float> query, float tau, TimePoint now) const;

 private:
  size_t dims_;
  std::vector<int8_t> codes_;      // size() x dims_
  std::vector<double> inv_norms_;  // 1 / |codes| per row; 0 for an all-zero row
  std::vector<uint64_t> ids_;
  std::vector<TimePoint> expires_;
};

}  // namespace llmserve::gateway
