// The AMX paths (matmul.h), on machines that have them; skipped elsewhere.
// AMX-INT8, quantized weights' whole groups of 16 tokens:
//  - the VNNI kernels' bits exactly, for every token: odd row counts, column
//    slices, tails of tokens that take the VNNI kernels, batched or alone.
// AMX-BF16, f16 and bf16 weights' prompt tokens (MatmulJob's n_bf16):
//  - against matmul_reference: |y - ref| <= 2^-15 sum_c |w_rc x_tc| (the
//    activations, and f16 weights, split in two bf16 parts, panel.h:
//    amx::bf16_weight_parts), plus f32 slack, which one bf16 rounding each
//    would miss by far;
//  - batch invariance: a bf16 token alone gives the bits it gives in any
//    batch, and a job's other tokens give what the f32 path gives them
//    alone;
//  - prepared and unprepared panels, and every chunk shape, give the same.
#include <gtest/gtest.h>

#include <cmath>
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
  const int64_t narrow = blk == 256 ? 256 : 96, wide = blk == 256 ? 2816 : 2336;  // wide: two column slices
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

struct Case {
  int64_t rows, cols, n_tokens, n_bf16;
};

class Bf16Matmul : public ::testing::TestWithParam<TensorType> {};

TEST_P(Bf16Matmul, MatchesReferenceAndIsBatchInvariant) {
  REQUIRE_AMX();
  const TensorType type = GetParam();
  const int64_t narrow = 96, wide = 2336;  // wide: two column slices
  const Case cases[] = {
      {17, narrow, 1, 1},   {33, narrow, 5, 5},  {1, narrow, 16, 16}, {40, narrow, 17, 17},
      {70, wide, 33, 33},   {400, narrow, 70, 70}, {33, narrow, 20, 7}, {45, wide, 130, 100},
      {16, narrow, 9, 0},
  };
  std::mt19937 rng(77 + static_cast<int>(type));
  ThreadPool pool(3);
  for (const Case& s : cases) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " tokens " +
                 std::to_string(s.n_tokens) + " bf16 " + std::to_string(s.n_bf16));
    const llmserve::testing::RandomMatrix m(rng, type, s.rows, s.cols, pool);
    const Matrix &w = m.w, &prepared = m.prepared;
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(s.n_tokens * s.cols));
    const size_t n_out = static_cast<size_t>(s.rows * s.n_tokens);

    Q8Act acts;  // the job only keeps the pointers
    uint16_t bf16_acts;
    EXPECT_EQ(MatmulJob({{&prepared, nullptr}}, x.data(), s.n_tokens, &acts, s.n_bf16, &bf16_acts).uses_bf16(),
              s.n_bf16 > 0);
    std::vector<float> y(n_out), y_unprepared(n_out), ref(n_out);
    matmul(prepared, x.data(), s.n_tokens, y.data(), pool, s.n_bf16);
    matmul(w, x.data(), s.n_tokens, y_unprepared.data(), pool, s.n_bf16);
    EXPECT_EQ(y, y_unprepared) << "prepared and on-the-fly panels must give identical results";
    matmul_reference(w, x.data(), s.n_tokens, ref.data());

    // Each token alone, on the path it took in the batch.
    std::vector<float> y1(static_cast<size_t>(s.rows));
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      matmul(prepared, x.data() + t * s.cols, 1, y1.data(), pool, t < s.n_bf16 ? 1 : 0);
      EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + t * s.rows)) << "token " << t << " alone differs";
    }

    const auto wf = llmserve::testing::dequantize_rows(type, m.raw, s.rows, s.cols);
    const double bound = 1.0 / 32768;
    int bad = 0;
    for (int64_t t = 0; t < s.n_bf16 && bad < 5; ++t)
      for (int64_t r = 0; r < s.rows && bad < 5; ++r) {
        double abs_dot = 0;
        for (int64_t c = 0; c < s.cols; ++c) abs_dot += std::fabs(wf[r * s.cols + c] * x[t * s.cols + c]);
        const size_t i = t * s.rows + r;
        if (std::fabs(y[i] - ref[i]) > abs_dot * (bound + 2e-5) + 1e-30) {
          ++bad;
          ADD_FAILURE() << "t " << t << " r " << r << ": got " << y[i] << ", reference " << ref[i] << ", |w||x| "
                        << abs_dot;
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, Bf16Matmul, ::testing::Values(TensorType::F16, TensorType::BF16),
                         [](const auto& info) { return std::string(gguf::type_info(info.param)->name); });

// Where the bf16 path does not apply, n_bf16 changes nothing: a job mixing
// f16 and quantized targets, and AMX turned off.
TEST(Bf16Fallback, GivesTheOtherPathsBitForBit) {
  REQUIRE_AMX();
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t cols = 256, n = 20;
  const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(n * cols));
  const auto raw_q = llmserve::testing::random_rows(rng, TensorType::Q8_0, 40, cols);
  const auto raw_f = llmserve::testing::random_rows(rng, TensorType::F16, 24, cols);
  const Matrix wq{TensorType::Q8_0, raw_q.data(), 40, cols, llmserve::testing::row_bytes_of(TensorType::Q8_0, cols)};
  const Matrix wf{TensorType::F16, raw_f.data(), 24, cols, llmserve::testing::row_bytes_of(TensorType::F16, cols)};
  std::vector<float> q0(40 * n), f0(24 * n), q1(40 * n), f1(24 * n);
  matmul({{&wq, q0.data()}, {&wf, f0.data()}}, x.data(), n, pool);
  matmul({{&wq, q1.data()}, {&wf, f1.data()}}, x.data(), n, pool, n);
  EXPECT_EQ(q0, q1);
  EXPECT_EQ(f0, f1);
  {
    AmxGuard off(false);
    EXPECT_FALSE(use_amx());
    matmul(wf, x.data(), n, f1.data(), pool, n);
    std::vector<float> plain(24 * n);
    matmul(wf, x.data(), n, plain.data(), pool);
    EXPECT_EQ(f1, plain);
  }
}

}  // namespace
}  // namespace llmserve::kernels
