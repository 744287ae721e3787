// Roofline loops for AVX-512: 64-byte loads, vpdpbusd, vpdpwssd, zmm FMA.
#include <cstring>

#include "bench/roofline_isa.h"
#include "kernels/immintrin_quiet.h"

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
// store of the sum, and a loop branch, four sums in turn. Some CPUs read
// faster this way than with read<true>, though the same loop with the sums
// in registers, or unrolled, reads like read<true>, so the sequence is
// pinned in assembly. Why it is faster is not understood; it is a read of
// the whole buffer that such a CPU does faster, so it counts.
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

// The buffer read the way decode reads a Q8_0 panel (panel.h): per
// 4352-byte group its 4 lines of scales prefetched together, then 8 blocks
// of 8 lines, each line prefetched as far ahead into L2, loaded and
// followed by 3 nops (formats_avx512.h: load_line), each block also loading
// its 32 bytes of scales as 16 floats; what is left of the bytes after the
// whole groups goes through read<true>. Some CPUs read faster this way than
// with the other passes, as decode's Q8_0 stream does. Why is not
// understood; it is a read of the whole buffer that such a CPU does
// faster, so it counts.
uint64_t read_q8_0_groups(const uint8_t* p, size_t bytes) {
  constexpr size_t kGroupBytes = 4352;
  const uint8_t* const end = p + bytes / kGroupBytes * kGroupBytes;
  __m512i sum = _mm512_setzero_si512(), line;
  __m512 scales = _mm512_setzero_ps(), block_scales;
  if (p < end)
    asm volatile(
        "1:\n\t"
        ".irp scale_line, 0, 64, 128, 192\n\t"
        "prefetcht1 %c[ahead]+\\scale_line(%[p])\n\t"
        ".endr\n\t"
        ".irp block, 0, 1, 2, 3, 4, 5, 6, 7\n\t"
        ".irp line, 0, 1, 2, 3, 4, 5, 6, 7\n\t"
        "prefetcht1 %c[ahead]+256+64*(8*\\block+\\line)(%[p])\n\t"
        "vmovdqa64 256+64*(8*\\block+\\line)(%[p]), %[line]\n\t"
        "nop\n\tnop\n\tnop\n\t"
        "vpaddq %[line], %[sum], %[sum]\n\t"
        ".endr\n\t"
        "vcvtph2ps 32*\\block(%[p]), %[block_scales]\n\t"
        "vaddps %[block_scales], %[scales], %[scales]\n\t"
        ".endr\n\t"
        "add %[step], %[p]\n\t"
        "cmp %[p], %[end]\n\t"
        "ja 1b"
        : [p] "+r"(p), [sum] "+v"(sum), [scales] "+v"(scales), [line] "=&v"(line),
          [block_scales] "=&v"(block_scales)
        : [end] "r"(end), [ahead] "i"(kReadPrefetchBytes), [step] "i"(kGroupBytes)
        : "cc", "memory");
  uint64_t words[8], scale_bits[8];
  std::memcpy(words, &sum, sizeof words);
  std::memcpy(scale_bits, &scales, sizeof scale_bits);
  uint64_t out = read<true>(end, bytes % kGroupBytes);
  for (int i = 0; i < 8; ++i) out ^= words[i] ^ scale_bits[i];
  return out;
}

// Independent chains: more than latency x throughput of either instruction,
// within the 32 registers. Each step is an asm statement on a register
// operand, and every loop over the chains is unrolled: written with
// intrinsics, GCC 12 kept the chains in memory (a load and a store around
// each instruction), and the loop measured the store forwarding, below the
// rate the prefill kernels reach.
constexpr int kChains = 24;

// vpdpbusd (int8, the quantized kernels) or, kWords, vpdpwssd (int16, f16
// and bf16 weights' prompt path).
template <bool kWords>
uint64_t dot_loop(int64_t iters) {
  __m512i acc[kChains];
#pragma GCC unroll kChains
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll kChains
    for (auto& v : acc) {
      if constexpr (kWords) asm("vpdpwssd %2, %1, %0" : "+v"(v) : "v"(a), "v"(b));
      else asm("vpdpbusd %2, %1, %0" : "+v"(v) : "v"(a), "v"(b));
    }
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

const RooflineKernels kRooflineKernels = {{read<false>, read<true>, read_sums_in_memory, read_q8_0_groups},
                                          dot_loop<false>, kChains * 64 * 2.0,
                                          f32_loop,        kChains * 16 * 2.0,
                                          dot_loop<true>,  kChains * 32 * 2.0};

}  // namespace llmserve::kernels::avx512
