#pragma once
// The plain float dot product the gateway tests compare against (the
// semantic index itself scores int8 codes with kernels::dot_i8).
#include <cstddef>

namespace llmserve::gateway::test {

inline float dot(const float* a, const float* b, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += double{a[i]} * b[i];
  return static_cast<float>(sum);
}

}  // namespace llmserve::gateway::test
