#pragma once
// Shared by the kernel tests: random weights in any GGUF layout, the ISA
// levels this machine can run, and error measures against a reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/quant.h"
#include "gguf/types.h"
#include "core/thread_pool.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"

namespace llmserve::testing {

// Every level up to the detected one, so each kernel path runs here.
inline std::vector<kernels::Isa> runnable_isas() {
  std::vector<kernels::Isa> out;
  for (int i = 0; i <= static_cast<int>(kernels::detected_isa()); ++i) out.push_back(static_cast<kernels::Isa>(i));
  return out;
}

// Restores the ISA in effect when the test started.
class IsaGuard {
 public:
  explicit IsaGuard(kernels::Isa isa) : saved_(kernels::active_isa()) { kernels::set_isa(isa); }
  ~IsaGuard() { kernels::set_isa(saved_); }

 private:
  kernels::Isa saved_;
};

// Sets an on/off kernel setting (cpu.h) for a scope, then restores the one
// in effect when the scope started.
template <bool (*kGet)(), void (*kSet)(bool)>
class SettingGuard {
 public:
  explicit SettingGuard(bool on) : saved_(kGet()) { kSet(on); }
  ~SettingGuard() { kSet(saved_); }

 private:
  bool saved_;
};
using PrefetchGuard = SettingGuard<kernels::prefetch_weights, kernels::set_prefetch_weights>;
using PrefetchNtaGuard = SettingGuard<kernels::prefetch_non_temporal, kernels::set_prefetch_non_temporal>;
using AmxGuard = SettingGuard<kernels::use_amx, kernels::set_amx>;

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Offsets of the f16 scale fields in one block, which must hold sane values
// (random bits could be inf/nan); every other byte is random.
inline std::vector<size_t> half_fields(gguf::TensorType type) {
  using gguf::TensorType;
  switch (type) {
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: return {0};
    case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K: return {0, 2};
    case TensorType::Q6_K: return {offsetof(gguf::BlockQ6_K, d)};
    default: return {};
  }
}

// `rows` rows of `cols` random weights of `type`, each row `row_bytes` long.
inline std::vector<uint8_t> random_rows(std::mt19937& rng, gguf::TensorType type, int64_t rows, int64_t cols) {
  const auto info = gguf::type_info(type).value();
  const size_t row_bytes = static_cast<size_t>(cols) / info.block_elems * info.block_bytes;
  std::vector<uint8_t> out(row_bytes * rows);
  if (type == gguf::TensorType::F32 || type == gguf::TensorType::F16 || type == gguf::TensorType::BF16) {
    const auto v = random_floats(rng, static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) {
      if (type == gguf::TensorType::F32) std::memcpy(&out[4 * i], &v[i], 4);
      const uint16_t h = type == gguf::TensorType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      if (type != gguf::TensorType::F32) std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (size_t blk = 0; blk < out.size() / info.block_bytes; ++blk)
    for (size_t off : half_fields(type)) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(&out[blk * info.block_bytes + off], &h, 2);
    }
  return out;
}

inline size_t row_bytes_of(gguf::TensorType type, int64_t cols) {
  const auto info = gguf::type_info(type).value();
  return static_cast<size_t>(cols) / info.block_elems * info.block_bytes;
}

// A random matrix of `type` (random_rows) and its copy prepared for the
// kernels (kernels::prepare). Built in place: w points into raw.
struct RandomMatrix {
  std::vector<uint8_t> raw;
  kernels::Matrix w, prepared;
  kernels::PackedWeights storage;
  RandomMatrix(std::mt19937& rng, gguf::TensorType type, int64_t rows, int64_t cols, ThreadPool& pool)
      : raw(random_rows(rng, type, rows, cols)),
        w{type, raw.data(), rows, cols, row_bytes_of(type, cols)},
        prepared(w),
        storage(kernels::prepare(prepared, &pool)) {}
  RandomMatrix(const RandomMatrix&) = delete;
  RandomMatrix& operator=(const RandomMatrix&) = delete;
};

// raw's rows (row_bytes_of apart) decoded to f32 with the reference dequantizer.
inline std::vector<float> dequantize_rows(gguf::TensorType type, const std::vector<uint8_t>& raw, int64_t rows,
                                          int64_t cols) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const size_t rb = row_bytes_of(type, cols);
  for (int64_t r = 0; r < rows; ++r) gguf::dequantize_row(type, raw.data() + r * rb, w.data() + r * cols, cols);
  return w;
}

}  // namespace llmserve::testing
