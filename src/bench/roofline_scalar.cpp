// Roofline loops in portable C++ (what the compiler makes of them for plain
// x86-64): 8-byte loads, integer and float multiply-adds.
#include <cstring>

#include "bench/roofline_isa.h"

namespace llmserve::kernels::scalar {

namespace {

template <bool kPrefetch>
uint64_t read(const uint8_t* p, size_t bytes) {
  uint64_t acc[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < bytes; i += 32)
    for (int u = 0; u < 4; ++u) {
      if (kPrefetch && u == 0 && i % 64 == 0) __builtin_prefetch(p + i + kReadPrefetchBytes, 0, 2);  // T1
      uint64_t v;
      std::memcpy(&v, p + i + 8 * u, 8);
      acc[u] += v;
    }
  return acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
}

constexpr int kChains = 8;

uint64_t int8_loop(int64_t iters) {
  int32_t acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = c;
  volatile int8_t va = 3, vb = -2;  // opaque, so the loop is not folded
  const int32_t a = va, b = vb;
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : acc) v = v * a + b;
  uint64_t s = 0;
  for (int32_t v : acc) s ^= static_cast<uint32_t>(v);
  return s;
}

uint64_t f32_loop(int64_t iters) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = static_cast<float>(c);
  volatile float va = 0.999f, vb = 1e-3f;
  const float a = va, b = vb;
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : acc) v = v * a + b;
  float s = 0;
  for (float v : acc) s += v;
  return static_cast<uint64_t>(s);
}

}  // namespace

const RooflineKernels kRooflineKernels = {{read<false>, read<true>, nullptr, nullptr}, int8_loop, kChains * 2.0,
                                          f32_loop, kChains * 2.0,
                                          nullptr,   0};

}  // namespace llmserve::kernels::scalar
