// Row ops for avx2: ops_impl.h instantiated with this ISA's vectors.
#include "kernels/ops_impl.h"
#include "kernels/simd_avx2.h"

namespace llmserve::kernels::avx2 {

// 32 byte pairs a step: |a| (unsigned) times b with a's sign, summed in
// pairs to int16 (at most 2 x 127 x 127: no saturation), then to int32.
int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
  }
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  int32_t sum = _mm_cvtsi128_si32(s);
  for (; i < n; ++i) sum += int32_t{a[i]} * b[i];
  return sum;
}

const OpsKernels kOpsKernels = ops_impl::ops_table<VF>(dot_i8);

}  // namespace llmserve::kernels::avx2
