// The read-bandwidth probe behind bench's roofline_frac: it keeps its buffer
// between measurements and always reports a finite, positive rate; and its
// AVX-512 pass that keeps its sums in memory (hand-written assembly) reads
// every word, as does the one that reads as decode reads a Q8_0 panel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "bench/roofline.h"
#include "bench/roofline_isa.h"
#include "core/thread_pool.h"
#include "kernels/large_alloc.h"

namespace llmserve::kernels {
namespace {

TEST(RooflineReadProbe, MeasuresRepeatedlyOnAnyThreadCount) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ReadProbe probe(pool, size_t{1} << 20);
    for (int reps : {1, 2}) {
      const double gbs = probe.gbs(reps);
      EXPECT_TRUE(std::isfinite(gbs) && gbs > 0) << threads << " threads: " << gbs;
    }
  }
  ThreadPool pool(2);
  EXPECT_GT(ReadProbe(pool, 100).gbs(), 0);  // smaller than one 256-byte step per thread
  EXPECT_GT(measure_read_bandwidth(pool, size_t{1} << 20, 1), 0);
}

// read[2] returns the XOR of its four 64-byte sums (line i added to sum
// i % 4, word by word): against the same reduction in plain C++, on random
// words, for 1 to 9 steps of 256 bytes.
TEST(RooflineReadProbe, SumsInMemoryPassReadsEveryWord) {
  if (detected_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512 (the pass is AVX-512 only)";
  const auto read = roofline_kernels(Isa::avx512).read[2];
  ASSERT_NE(read, nullptr);
  std::mt19937_64 rng(3);
  for (size_t steps : {1, 2, 5, 9}) {
    const size_t bytes = steps * 256;
    auto* buf = static_cast<uint64_t*>(allocate_large(bytes));
    ASSERT_NE(buf, nullptr);
    for (size_t w = 0; w < bytes / 8; ++w) buf[w] = rng();
    uint64_t sums[4][8] = {};
    for (size_t w = 0; w < bytes / 8; ++w) sums[w / 8 % 4][w % 8] += buf[w];
    uint64_t expect = 0;
    for (const auto& line : sums)
      for (uint64_t v : line) expect ^= v;
    EXPECT_EQ(read(reinterpret_cast<const uint8_t*>(buf), bytes), expect) << steps << " steps";
    std::free(buf);
  }
}

// read[3] returns, for whole 4352-byte groups, the XOR of its eight
// 64-bit lanes of code sums (the 4096 bytes after each group's first 256,
// word w of a line added to lane w) and of its float scale sums' bits: with
// the scale bytes zero (f16 +0.0) those sums are +0.0, so the expected
// value is the code words' lane sums XORed, for 1 to 3 groups. A buffer
// with a tail past the whole groups (or none at all) still reads.
TEST(RooflineReadProbe, Q8_0GroupPassReadsEveryCodeWord) {
  if (detected_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512 (the pass is AVX-512 only)";
  const auto read = roofline_kernels(Isa::avx512).read[3];
  ASSERT_NE(read, nullptr);
  constexpr size_t kGroup = 4352, kScales = 256;
  std::mt19937_64 rng(5);
  for (size_t groups : {1, 2, 3}) {
    const size_t bytes = groups * kGroup;
    auto* buf = static_cast<uint64_t*>(allocate_large(bytes));
    ASSERT_NE(buf, nullptr);
    uint64_t lanes[8] = {};
    for (size_t w = 0; w < bytes / 8; ++w) {
      const bool scale = w * 8 % kGroup < kScales;
      buf[w] = scale ? 0 : rng();
      if (!scale) lanes[w % 8] += buf[w];
    }
    uint64_t expect = 0;
    for (uint64_t v : lanes) expect ^= v;
    EXPECT_EQ(read(reinterpret_cast<const uint8_t*>(buf), bytes), expect) << groups << " groups";
    std::free(buf);
  }
  ThreadPool pool(2);
  EXPECT_GT(ReadProbe(pool, kGroup + 512).gbs(), 0);
  EXPECT_GT(ReadProbe(pool, 512).gbs(), 0);
}

}  // namespace
}  // namespace llmserve::kernels
