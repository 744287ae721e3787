// Roofline loops for AVX2: 32-byte loads, vpmaddubsw + vpmaddwd + vpaddd
// (the quantized kernels' int8 dot step without VNNI), ymm FMA.
#include <cstring>

#include "bench/roofline_isa.h"
#include "kernels/immintrin_quiet.h"

namespace llmserve::kernels::avx2 {

namespace {

template <bool kPrefetch>
uint64_t read(const uint8_t* p, size_t bytes) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i < bytes; i += 256)
    for (int u = 0; u < 8; ++u) {
      if (kPrefetch && u % 2 == 0)
        _mm_prefetch(reinterpret_cast<const char*>(p + i + kReadPrefetchBytes + 32 * u), _MM_HINT_T1);
      acc[u % 4] = _mm256_add_epi64(acc[u % 4], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32 * u)));
    }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  uint64_t out[4];
  std::memcpy(out, &s, sizeof out);
  return out[0] ^ out[3];
}

// 16 ymm registers: chains plus the constants and a temporary. As in
// roofline_avx512.cpp, the steps are asm on register operands in unrolled
// loops: with intrinsics GCC 12 hoisted the loop-invariant vpmaddubsw and
// vpmaddwd out of the int8 loop, leaving only the adds to measure.
constexpr int kChains = 8;

uint64_t int8_loop(int64_t iters) {
  __m256i acc[kChains];
#pragma GCC unroll kChains
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll kChains
    for (auto& v : acc) {
      __m256i t;
      asm("vpmaddubsw %[b], %[a], %[t]\n\t"
          "vpmaddwd %[ones], %[t], %[t]\n\t"
          "vpaddd %[t], %[v], %[v]"
          : [v] "+x"(v), [t] "=&x"(t)
          : [a] "x"(a), [b] "x"(b), [ones] "x"(ones));
    }
  __m256i s = acc[0];
#pragma GCC unroll kChains
  for (int c = 1; c < kChains; ++c) s = _mm256_xor_si256(s, acc[c]);
  return static_cast<uint64_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(s)));
}

uint64_t f32_loop(int64_t iters) {
  constexpr int kFmaChains = 12;
  __m256 acc[kFmaChains];
#pragma GCC unroll kFmaChains
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll kFmaChains
    for (auto& v : acc) asm("vfmadd132ps %2, %1, %0" : "+x"(v) : "x"(b), "x"(a));  // v = v * a + b
  __m256 s = acc[0];
#pragma GCC unroll kFmaChains
  for (int c = 1; c < kFmaChains; ++c) s = _mm256_add_ps(s, acc[c]);
  return static_cast<uint64_t>(_mm_cvtss_f32(_mm256_castps256_ps128(s)));
}

}  // namespace

const RooflineKernels kRooflineKernels = {{read<false>, read<true>, nullptr, nullptr}, int8_loop, kChains * 32 * 2.0,
                                          f32_loop, 12 * 8 * 2.0,
                                          nullptr,   0};

}  // namespace llmserve::kernels::avx2
