#pragma once
// The row ops written once against a float-vector type VF (simd_scalar.h
// describes the interface); each ISA file instantiates them with its own VF.
// Everything here is a template on VF, so the instantiations compiled with
// different ISA flags never share a symbol.
#include <cmath>
#include <cstdint>

#include "kernels/ops_isa.h"

namespace llmserve::kernels::ops_impl {

// Visits [0, n) in vectors, the last one partial: f(i, lanes).
template <class VF, class F>
void for_each_vector(int64_t n, F f) {
  int64_t i = 0;
  for (; i + VF::N <= n; i += VF::N) f(i, VF::N);
  if (i < n) f(i, static_cast<int>(n - i));
}

template <class VF>
VF load(const float* p, int lanes) {
  return lanes == VF::N ? VF::load(p) : VF::load(p, lanes);
}
template <class VF, class T>
void store(VF v, T* p, int lanes) {
  if (lanes == VF::N) v.store(p);
  else v.store(p, lanes);
}

template <class VF>
void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, float* y) {
  VF ss = VF::zero();
  for_each_vector<VF>(dim, [&](int64_t i, int lanes) {
    const VF v = load<VF>(x + i, lanes);
    ss = fma(v, v, ss);
  });
  const VF scale = VF::set1(1.0f / std::sqrt(ss.reduce_add() / static_cast<float>(dim) + eps));
  for_each_vector<VF>(dim, [&](int64_t i, int lanes) {
    store(load<VF>(x + i, lanes) * scale * load<VF>(weight + i, lanes), y + i, lanes);
  });
}

template <class VF>
float max_value(const float* x, int64_t n) {
  VF mx = VF::set1(-INFINITY);
  for_each_vector<VF>(n, [&](int64_t i, int lanes) { mx = max(mx, keep_first(load<VF>(x + i, lanes), lanes, -INFINITY)); });
  return mx.reduce_max();
}

template <class VF>
void softmax(float* x, int64_t n) {
  const VF m = VF::set1(max_value<VF>(x, n));
  VF sum = VF::zero();
  for_each_vector<VF>(n, [&](int64_t i, int lanes) {
    const VF e = keep_first(exp(load<VF>(x + i, lanes) - m), lanes, 0.0f);
    sum = sum + e;
    store(e, x + i, lanes);
  });
  const VF inv = VF::set1(1.0f / sum.reduce_add());
  for_each_vector<VF>(n, [&](int64_t i, int lanes) { store(load<VF>(x + i, lanes) * inv, x + i, lanes); });
}

template <class VF>
void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const VF one = VF::set1(1.0f);
  for_each_vector<VF>(n, [&](int64_t i, int lanes) {
    const VF g = load<VF>(gate + i, lanes);
    store(g / (one + exp(VF::zero() - g)) * load<VF>(up + i, lanes), out + i, lanes);
  });
}

template <class VF>
void add(const float* a, const float* b, int64_t n, float* out) {
  for_each_vector<VF>(n, [&](int64_t i, int lanes) { store(load<VF>(a + i, lanes) + load<VF>(b + i, lanes), out + i, lanes); });
}

template <class VF>
void to_f16(const float* x, int64_t n, uint16_t* out) {
  for_each_vector<VF>(n, [&](int64_t i, int lanes) { store(load<VF>(x + i, lanes), out + i, lanes); });
}

template <class VF>
constexpr OpsKernels ops_table(int32_t (*dot_i8)(const int8_t*, const int8_t*, int64_t)) {
  return {rmsnorm<VF>, max_value<VF>, softmax<VF>, silu_mul<VF>, add<VF>, to_f16<VF>, dot_i8};
}

}  // namespace llmserve::kernels::ops_impl
