// The AMX-INT8 path (matmul.h), on machines that have it; skipped
// elsewhere. Quantized weights' whole groups of 16 tokens:
//  - the VNNI kernels' bits exactly, for every token: odd row counts, column
//    slices, tails of tokens that take the VNNI kernels, batched or alone.
// AMX-BF16, f16 and bf16 weights' prompt tokens: matmul_prompt_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"

namespace llmserve::kernels {
namespace {

using gguf::TensorType;
using llmserve::testing::AmxGuard;

#define REQUIRE_AMX()                                                             \
  if (!amx_detected()) GTEST_SKIP() << "this CPU or OS has no AMX (cpu.h: use_amx)"; \
  AmxGuard amx_on(true)

class Int8Tiles : public ::testing::TestWithParam<TensorType> {};

TEST_P(Int8Tiles, GiveTheVnniKernelsBitsForEveryToken) {
  REQUIRE_AMX();
  const TensorType type = GetParam();
  const int64_t blk = gguf::type_info(type)->block_elems;
  const int64_t narrow = blk == 256 ? 256 : 96, wide = blk == 256 ? 2816 : 8480;  // wide: two column slices (slice_cols)
  struct Shape {
    int64_t rows, cols, n_tokens;
  };
  // From 64 tokens on (matmul.cpp: kAmxInt8Tokens); fewer take the VNNI
  // kernels alone. Whole groups in pairs and alone, tails of 1-15 tokens.
  const Shape shapes[] = {{17, narrow, 64}, {33, narrow, 65}, {1, narrow, 80}, {40, narrow, 95},
                          {70, wide, 64},   {400, narrow, 70}, {45, wide, 130}, {16, narrow, 20}};
  std::mt19937 rng(91 + static_cast<int>(type));
  ThreadPool pool(3);
  for (const Shape& s : shapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " tokens " +
                 std::to_string(s.n_tokens));
    const llmserve::testing::RandomMatrix m(rng, type, s.rows, s.cols, pool);
    const Matrix &w = m.w, &prepared = m.prepared;
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(s.n_tokens * s.cols));
    const size_t n_out = static_cast<size_t>(s.rows * s.n_tokens);
    std::vector<float> tiles(n_out), tiles_unprepared(n_out), vnni(n_out);
    matmul(prepared, x.data(), s.n_tokens, tiles.data(), pool);
    matmul(w, x.data(), s.n_tokens, tiles_unprepared.data(), pool);
    {
      AmxGuard off(false);
      matmul(prepared, x.data(), s.n_tokens, vnni.data(), pool);
    }
    EXPECT_EQ(tiles, vnni);
    EXPECT_EQ(tiles, tiles_unprepared);
    std::vector<float> alone(static_cast<size_t>(s.rows));
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      matmul(prepared, x.data() + t * s.cols, 1, alone.data(), pool);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), tiles.begin() + t * s.rows)) << "token " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, Int8Tiles,
                         ::testing::Values(TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K),
                         [](const auto& info) { return std::string(gguf::type_info(info.param)->name); });

}  // namespace
}  // namespace llmserve::kernels
