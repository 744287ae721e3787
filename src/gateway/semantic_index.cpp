#include "gateway/semantic_index.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"

namespace llmserve::gateway {

namespace {

constexpr double kMaxCode = 127;

// Writes `v` scaled so its largest |value| is 127 and rounded to out[0,
// v.size()), left as is for an all-zero `v`; returns 1 / |codes|, or 0.
double quantize(std::span<const float> v, int8_t* out) {
  float max_abs = 0;
  for (const float x : v) max_abs = std::max(max_abs, std::abs(x));
  if (max_abs == 0) return 0;
  const double scale = kMaxCode / max_abs;  // double: finite even for a subnormal max_abs
  int64_t norm2 = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const long code = std::lround(v[i] * scale);
    out[i] = static_cast<int8_t>(code);
    norm2 += code * code;
  }
  return 1 / std::sqrt(static_cast<double>(norm2));
}

}  // namespace

size_t SemanticIndex::row_bytes(size_t dims) {
  return dims * sizeof(int8_t) + sizeof(double) + sizeof(uint64_t) + sizeof(TimePoint);
}

size_t SemanticIndex::add(std::span<const float> embedding, uint64_t id, TimePoint expires) {
  codes_.resize(codes_.size() + dims_);  // zeros, kept for an all-zero embedding
  inv_norms_.push_back(quantize(embedding, codes_.data() + ids_.size() * dims_));
  ids_.push_back(id);
  expires_.push_back(expires);
  return ids_.size() - 1;
}

std::optional<uint64_t> SemanticIndex::remove(size_t row) {
  const size_t last = ids_.size() - 1;
  std::optional<uint64_t> moved;
  if (row != last) {
    std::copy_n(codes_.begin() + last * dims_, dims_, codes_.begin() + row * dims_);
    inv_norms_[row] = inv_norms_[last];
    ids_[row] = ids_[last];
    expires_[row] = expires_[last];
    moved = ids_[row];
  }
  codes_.resize(last * dims_);
  inv_norms_.pop_back();
  ids_.pop_back();
  expires_.pop_back();
  if (codes_.size() < codes_.capacity() / 4) {  // the cache's memory bound counts rows, not spare capacity
    codes_.shrink_to_fit();
    inv_norms_.shrink_to_fit();
    ids_.shrink_to_fit();
    expires_.shrink_to_fit();
  }
  return moved;
}

void check_embedding(std::span<const float> v) {
  if (v.size() > SemanticIndex::kMaxDims)
    throw Error("cache: the prompt embedding has " + std::to_string(v.size()) + " values; at most " +
                std::to_string(SemanticIndex::kMaxDims) + " are supported");
  if (!std::ranges::all_of(v, [](float x) { return std::isfinite(x); }))  // an embedder's bug
    throw Error("cache: the prompt embedding has a value that is not finite");
}

float similarity(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size())
    throw Error("embeddings of different lengths (" + std::to_string(a.size()) + ", " + std::to_string(b.size()) + ")");
  check_embedding(a);
  check_embedding(b);
  std::vector<int8_t> row(a.size(), 0), query(b.size(), 0);
  const double inv_norms = quantize(a, row.data()) * quantize(b, query.data());
  return static_cast<float>(kernels::dot_i8(row.data(), query.data(), static_cast<int64_t>(row.size())) * inv_norms);
}

SemanticIndex::Nearest SemanticIndex::nearest(std::span<const float> query, float tau, TimePoint now) const {
  std::vector<int8_t> codes(dims_, 0);
  const double inv_query_norm = quantize(query, codes.data());
  Nearest result;
  for (size_t row = 0; row < ids_.size(); ++row) {
    if (expires_[row] <= now) {
      result.expired.push_back(ids_[row]);
      continue;
    }
    // In double, so identical codes give exactly 1 once rounded to float.
    const auto sim = static_cast<float>(kernels::dot_i8(codes_.data() + row * dims_, codes.data(), static_cast<int64_t>(dims_)) *
                                        inv_norms_[row] * inv_query_norm);
    if (sim < tau || (result.match && sim <= result.match->similarity)) continue;
    result.match = Match{ids_[row], sim};
  }
  return result;
}

}  // namespace llmserve::gateway
