#pragma once
// The float-vector interface the ops and attention templates are written
// against, in portable C++: 8 lanes the compiler may map to SSE2. Each ISA
// has its own (simd_avx2.h, simd_avx512.h) in its own namespace.
//   N; f16(bits) (one scalar half); zero(); set1(x); load(p) / load(p, n)
//   for f32 and f16 bits (the n form reads n < N lanes, the rest 0);
//   load(int8 p) (N values); store(p) / store(p, n) to f32 and to f16
//   bits (round to nearest even); + - * /;
//   fma(a, b, c) = a*b + c; max; keep_first(a, n, fill); select_ge(x, y,
//   a, b) (lane by lane x >= y ? a : b); reduce_add(); reduce_max();
//   exp(x) (saturating to 0 and +inf); transpose(rows, dst, ds) of an
//   N x N tile held as N vectors (dst[c * ds + r] = lane c of rows[r]);
//   sum_each(a): lane i the sum of the lanes of a[i], for N vectors.
#include <cmath>
#include <cstdint>

#include "core/fp16.h"

namespace llmserve::kernels::scalar {

struct VF {
  static constexpr int N = 8;
  float v[N];

  static float f16(uint16_t h) { return f16_to_f32(h); }
  static VF zero() { return set1(0.0f); }
  static VF set1(float x) {
    VF r;
    for (float& l : r.v) l = x;
    return r;
  }
  static VF load(const float* p) { return load(p, N); }
  static VF load(const float* p, int n) {
    VF r = zero();
    for (int i = 0; i < n; ++i) r.v[i] = p[i];
    return r;
  }
  static VF load(const uint16_t* p) { return load(p, N); }
  static VF load(const uint16_t* p, int n) {
    VF r = zero();
    for (int i = 0; i < n; ++i) r.v[i] = f16_to_f32(p[i]);
    return r;
  }
  static VF load(const int8_t* p) {
    VF r;
    for (int i = 0; i < N; ++i) r.v[i] = p[i];
    return r;
  }
  void store(float* p) const { store(p, N); }
  void store(float* p, int n) const {
    for (int i = 0; i < n; ++i) p[i] = v[i];
  }
  void store(uint16_t* p) const { store(p, N); }
  void store(uint16_t* p, int n) const {
    for (int i = 0; i < n; ++i) p[i] = f32_to_f16(v[i]);
  }

  template <class Op>
  static VF map(VF a, VF b, Op op) {
    VF r;
    for (int i = 0; i < N; ++i) r.v[i] = op(a.v[i], b.v[i]);
    return r;
  }
  friend VF operator+(VF a, VF b) { return map(a, b, [](float x, float y) { return x + y; }); }
  friend VF operator-(VF a, VF b) { return map(a, b, [](float x, float y) { return x - y; }); }
  friend VF operator*(VF a, VF b) { return map(a, b, [](float x, float y) { return x * y; }); }
  friend VF operator/(VF a, VF b) { return map(a, b, [](float x, float y) { return x / y; }); }
  friend VF fma(VF a, VF b, VF c) { return a * b + c; }
  friend VF max(VF a, VF b) { return map(a, b, [](float x, float y) { return x > y ? x : y; }); }
  friend VF keep_first(VF a, int n, float fill) {
    for (int i = n; i < N; ++i) a.v[i] = fill;
    return a;
  }
  friend VF select_ge(VF x, VF y, VF a, VF b) {
    for (int i = 0; i < N; ++i) a.v[i] = x.v[i] >= y.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  float reduce_add() const {
    float s = 0;
    for (float l : v) s += l;
    return s;
  }
  float reduce_max() const {
    float m = v[0];
    for (float l : v) m = l > m ? l : m;
    return m;
  }
  friend VF exp(VF x) {
    for (float& l : x.v) l = std::exp(l);
    return x;
  }
  static void transpose(const VF* rows, float* dst, int64_t ds) {
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < N; ++c) dst[c * ds + r] = rows[r].v[c];
  }
  static VF sum_each(const VF* a) {
    VF r;
    for (int i = 0; i < N; ++i) r.v[i] = a[i].reduce_add();
    return r;
  }
};

}  // namespace llmserve::kernels::scalar
