// Roofline loops for AVX-512: 64-byte loads, vpdpbusd, zmm FMA.
#include <cstring>

#include "kernels/immintrin_quiet.h"
#include "kernels/roofline_isa.h"

namespace llmserve::kernels::avx512 {

namespace {

template <bool kPrefetch>
uint64_t read(const uint8_t* p, size_t bytes) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t i = 0; i < bytes; i += 256)
    for (int u = 0; u < 4; ++u) {
      if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + i + kReadPrefetchBytes + 64 * u), _MM_HINT_T1);
      acc[u] = _mm512_add_epi64(acc[u], _mm512_load_si512(p + i + 64 * u));
    }
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
  uint64_t out[8];
  std::memcpy(out, &s, sizeof out);
  return out[0] ^ out[7];
}

// The prefetching read with each 64-byte sum kept in memory: per line, a
// prefetch, a load of the sum (an L1 hit), the add of the line and the
// store of the sum, and a loop branch, four sums in turn. On the Intel AMX
// host this reads 36-39 GB/s on 2 threads where read<true> reads 30-32 (and
// the f16 decode kernel streamed at 1.07-1.10 of that): the same loop with
// the sums in registers, or unrolled, reads like read<true>, so the
// sequence is pinned in assembly. Why it is faster is not understood; it is
// a read of the whole buffer that this CPU does faster, so it counts.
uint64_t read_sums_in_memory(const uint8_t* p, size_t bytes) {
  alignas(64) uint64_t sums[4 * 8] = {};  // four 64-byte sums
  const uint8_t* const end = p + bytes;
  uint64_t* const sums_end = sums + 4 * 8;
  while (p < end) {
    uint64_t* s = sums;
    asm volatile(
        "1:\n\t"
        "prefetcht1 %c[ahead](%[p])\n\t"
        "vmovdqa64 (%[s]), %%zmm0\n\t"
        "vpaddq (%[p]), %%zmm0, %%zmm0\n\t"
        "vmovdqa64 %%zmm0, (%[s])\n\t"
        "add $64, %[s]\n\t"
        "add $64, %[p]\n\t"
        "cmp %[s], %[s_end]\n\t"
        "jne 1b"
        : [s] "+r"(s), [p] "+r"(p)
        : [s_end] "r"(sums_end), [ahead] "i"(kReadPrefetchBytes)
        : "xmm0", "memory", "cc");
  }
  uint64_t out = 0;
  for (uint64_t v : sums) out ^= v;
  return out;
}

// Independent chains: more than latency x throughput of either instruction,
// within the 32 registers. Each step is an asm statement on a register
// operand, and every loop over the chains is unrolled: written with
// intrinsics, GCC 12 kept the chains in memory (a load and a store around
// each instruction), and the loop measured the store forwarding, at half the
// rate the prefill kernels then exceeded (pp_compute_frac 1.1).
constexpr int kChains = 24;

uint64_t int8_loop(int64_t iters) {
  __m512i acc[kChains];
#pragma GCC unroll kChains
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll kChains
    for (auto& v : acc) asm("vpdpbusd %2, %1, %0" : "+v"(v) : "v"(a), "v"(b));
  __m512i s = acc[0];
#pragma GCC unroll kChains
  for (int c = 1; c < kChains; ++c) s = _mm512_xor_si512(s, acc[c]);
  return static_cast<uint64_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(s)));
}

uint64_t f32_loop(int64_t iters) {
  __m512 acc[kChains];
#pragma GCC unroll kChains
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll kChains
    for (auto& v : acc) asm("vfmadd132ps %2, %1, %0" : "+v"(v) : "v"(b), "v"(a));  // v = v * a + b
  __m512 s = acc[0];
#pragma GCC unroll kChains
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return static_cast<uint64_t>(_mm_cvtss_f32(_mm512_castps512_ps128(s)));
}

}  // namespace

const RooflineKernels kRooflineKernels = {{read<false>, read<true>, read_sums_in_memory}, int8_loop, kChains * 64 * 2.0, f32_loop, kChains * 16 * 2.0};

}  // namespace llmserve::kernels::avx512
