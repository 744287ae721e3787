#pragma once
// The semantic layer's store for one namespace: unit-length embeddings as
// the rows of one contiguous matrix, each with its entry's id and expiry.
// nearest() is a flat scan of dot products (= cosine similarity for unit
// vectors); removing a row moves the last row into its place.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace llmserve::gateway {

using TimePoint = std::chrono::steady_clock::time_point;

// Dot product of two float arrays of length n.
float dot(const float* a, const float* b, size_t n);

class SemanticIndex {
 public:
  explicit SemanticIndex(size_t dims) : dims_(dims) {}

  size_t dims() const { return dims_; }
  size_t size() const { return ids_.size(); }

  // Appends a row (unit_vector.size() == dims()); returns its index.
  size_t add(std::span<const float> unit_vector, uint64_t id, TimePoint expires);
  // Removes `row`; returns the id of the row moved into its place, if any.
  std::optional<uint64_t> remove(size_t row);

  struct Match {
    uint64_t id = 0;
    float similarity = 0;
  };
  // The row most similar to `query` among those with similarity >= tau and
  // not expired at `now`.
  std::optional<Match> nearest(std::span<const float> query, float tau, TimePoint now) const;

 private:
  size_t dims_;
  std::vector<float> rows_;  // size() x dims_
  std::vector<uint64_t> ids_;
  std::vector<TimePoint> expires_;
};

}  // namespace llmserve::gateway
