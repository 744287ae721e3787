// f16 and bf16 weights' prompt path (matmul.h: PromptPath), each path on
// machines that have it, skipped elsewhere: AMX-BF16 tiles, and int16 codes
// on vpdpwssd (AMX turned off where the CPU has it).
//  - against matmul_reference, within each path's error bound: AMX-BF16
//    2^-15 sum_c |w_rc x_tc| (the activations, and f16 weights, split in
//    two bf16 parts, panel.h: amx::bf16_weight_parts), which one bf16
//    rounding each would miss by far; int16 half a code step of each block
//    on either side (panel.h: namespace int16), computed per block, and
//    the bits of the int16 arithmetic done in scalar code (int16_path);
//  - batch invariance: a prompt token alone gives the bits it gives in any
//    batch, and a job's other tokens give what the f32 path gives them
//    alone;
//  - prepared and unprepared panels, and every chunk shape, give the same;
//  - where a job cannot take the path, n_prompt changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/panel.h"

namespace llmserve::kernels {
namespace {

using gguf::TensorType;
using llmserve::testing::AmxGuard;

// Puts `path` in effect for the scope, or says why this machine cannot.
class PathGuard {
 public:
  explicit PathGuard(PromptPath path) {
    if (active_isa() != Isa::avx512) skip_ = "the avx512 level is not active (no AVX-512 VNNI, or LLMSERVE_ISA)";
    else if (path == PromptPath::amx_bf16 && !amx_detected()) skip_ = "this CPU or OS has no AMX (cpu.h: use_amx)";
    if (!skip_) amx_.emplace(path == PromptPath::amx_bf16);
  }
  const char* skip() const { return skip_; }

 private:
  const char* skip_ = nullptr;
  std::optional<AmxGuard> amx_;
};

// |y - ref| allowed for one row and token on `path`, f32 slack included.
double error_bound(PromptPath path, const float* w, const float* x, int64_t cols) {
  double abs_dot = 0, quantization = 0;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    double w_max = 0, x_max = 0, w_abs = 0, x_abs = 0;
    for (int64_t c = b * kQBlock; c < (b + 1) * kQBlock; ++c) {
      abs_dot += std::fabs(static_cast<double>(w[c]) * x[c]);
      w_max = std::max(w_max, std::fabs(static_cast<double>(w[c])));
      x_max = std::max(x_max, std::fabs(static_cast<double>(x[c])));
      w_abs += std::fabs(w[c]);
      x_abs += std::fabs(x[c]);
    }
    // Half a step of max / kMaxCode on each side, and a little for the
    // float rounding of the scales the codes come from.
    const double w_err = w_max / (2 * int16::kMaxCode) * 1.01, x_err = x_max / (2 * int16::kMaxCode) * 1.01;
    quantization += w_err * x_abs + x_err * w_abs + kQBlock * w_err * x_err;
  }
  return path == PromptPath::amx_bf16 ? abs_dot * (1.0 / 32768 + 2e-5) : quantization + abs_dot * 2e-6;
}

// The int16 path's arithmetic for one row and token, in scalar code: the
// codes (matmul_int16.cpp rounds as std::nearbyint does), exact integer
// block sums, and the same f32 operations in the same order. The kernels
// must give its bits.
float int16_path(const float* w, const float* x, int64_t cols) {
  struct Coded {
    int32_t q[kQBlock];
    float scale;
  };
  auto code = [](const float* v) {
    float amax = 0;
    for (int c = 0; c < kQBlock; ++c) amax = std::max(amax, std::fabs(v[c]));
    const float inv = amax > 0 ? std::min(static_cast<float>(int16::kMaxCode) / amax, 3.0e38f) : 0.0f;
    Coded out;
    for (int c = 0; c < kQBlock; ++c) out.q[c] = static_cast<int32_t>(std::nearbyint(v[c] * inv));
    out.scale = amax / static_cast<float>(int16::kMaxCode);
    return out;
  };
  float acc = 0;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const Coded cw = code(w + b * kQBlock), cx = code(x + b * kQBlock);
    int32_t sum = 0;
    for (int c = 0; c < kQBlock; ++c) sum += cw.q[c] * cx.q[c];
    acc = std::fma(static_cast<float>(sum), cw.scale * cx.scale, acc);
  }
  return acc;
}

struct Case {
  int64_t rows, cols, n_tokens, n_prompt;
};

class PromptMatmul : public ::testing::TestWithParam<std::tuple<TensorType, PromptPath>> {};

TEST_P(PromptMatmul, MatchesReferenceAndIsBatchInvariant) {
  const auto [type, path] = GetParam();
  const PathGuard on(path);
  if (on.skip()) GTEST_SKIP() << on.skip();
  ASSERT_EQ(prompt_path(type), path);
  const int64_t narrow = 96, wide = 2336;  // wide: two column slices
  // Groups of 16 prompt tokens whole and not; wide x 130 tokens: blocks of
  // tokens (matmul.cpp: prompt_block_) for both paths.
  const Case cases[] = {
      {17, narrow, 1, 1},   {33, narrow, 5, 5},  {1, narrow, 16, 16}, {40, narrow, 17, 17},
      {70, wide, 33, 33},   {400, narrow, 70, 70}, {33, narrow, 20, 7}, {45, wide, 130, 100},
      {16, narrow, 9, 0},
  };
  std::mt19937 rng(77 + static_cast<int>(type));
  ThreadPool pool(3);
  for (const Case& s : cases) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " tokens " +
                 std::to_string(s.n_tokens) + " prompt " + std::to_string(s.n_prompt));
    const llmserve::testing::RandomMatrix m(rng, type, s.rows, s.cols, pool);
    const Matrix &w = m.w, &prepared = m.prepared;
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(s.n_tokens * s.cols));
    const size_t n_out = static_cast<size_t>(s.rows * s.n_tokens);

    Q8Act acts;  // the job only keeps the pointers
    uint8_t prompt_acts;
    EXPECT_EQ(MatmulJob({{&prepared, nullptr}}, x.data(), s.n_tokens, &acts, s.n_prompt, &prompt_acts).prompt_path(),
              s.n_prompt > 0 ? path : PromptPath::none);
    std::vector<float> y(n_out), y_unprepared(n_out), ref(n_out);
    matmul(prepared, x.data(), s.n_tokens, y.data(), pool, s.n_prompt);
    matmul(w, x.data(), s.n_tokens, y_unprepared.data(), pool, s.n_prompt);
    EXPECT_EQ(y, y_unprepared) << "prepared and on-the-fly panels must give identical results";
    matmul_reference(w, x.data(), s.n_tokens, ref.data());

    // Each token alone, on the path it took in the batch.
    std::vector<float> y1(static_cast<size_t>(s.rows));
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      matmul(prepared, x.data() + t * s.cols, 1, y1.data(), pool, t < s.n_prompt ? 1 : 0);
      EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + t * s.rows)) << "token " << t << " alone differs";
    }

    const auto wf = llmserve::testing::dequantize_rows(type, m.raw, s.rows, s.cols);
    int bad = 0;
    for (int64_t t = 0; t < s.n_prompt && bad < 5; ++t)
      for (int64_t r = 0; r < s.rows && bad < 5; ++r) {
        const double bound = error_bound(path, &wf[r * s.cols], &x[t * s.cols], s.cols);
        const size_t i = t * s.rows + r;
        if (std::fabs(y[i] - ref[i]) > bound + 1e-30) {
          ++bad;
          ADD_FAILURE() << "t " << t << " r " << r << ": got " << y[i] << ", reference " << ref[i] << ", bound "
                        << bound;
        }
        if (path == PromptPath::int16 && y[i] != int16_path(&wf[r * s.cols], &x[t * s.cols], s.cols)) {
          ++bad;
          ADD_FAILURE() << "t " << t << " r " << r << ": got " << y[i] << ", the int16 path's arithmetic "
                        << int16_path(&wf[r * s.cols], &x[t * s.cols], s.cols);
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, PromptMatmul,
                         ::testing::Combine(::testing::Values(TensorType::F16, TensorType::BF16),
                                            ::testing::Values(PromptPath::amx_bf16, PromptPath::int16)),
                         [](const auto& info) {
                           return std::string(gguf::type_info(std::get<0>(info.param))->name) +
                                  (std::get<1>(info.param) == PromptPath::amx_bf16 ? "_amx_bf16" : "_int16");
                         });

// Weights of zero, and bf16 weights too small for kMaxCode / max |w| to be
// a float: finite results, zero and about the reference.
TEST(Int16Path, ZeroAndTinyBlocksStayFinite) {
  const PathGuard on(PromptPath::int16);
  if (on.skip()) GTEST_SKIP() << on.skip();
  ThreadPool pool(2);
  const int64_t rows = 20, cols = 64, n = 3;
  std::vector<uint16_t> raw(rows * cols, 0);
  for (int64_t c = 0; c < cols; ++c) raw[5 * cols + c] = f32_to_bf16(c % 2 ? 1e-38f : -3e-39f);
  for (int64_t c = 0; c < cols; ++c) raw[6 * cols + c] = f32_to_bf16(c < 32 ? 0.0f : 0.5f);
  const Matrix w{TensorType::BF16, reinterpret_cast<const uint8_t*>(raw.data()), rows, cols, cols * 2};
  std::vector<float> x(n * cols, 1.0f), y(n * rows, -1.0f), ref(n * rows);
  std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);  // token 1: all zero
  matmul(w, x.data(), n, y.data(), pool, n);
  matmul_reference(w, x.data(), n, ref.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float v = y[t * rows + r];
      ASSERT_TRUE(std::isfinite(v)) << "t " << t << " r " << r;
      if (r == 5) {
        EXPECT_LE(std::fabs(v), 1e-36f) << "t " << t;
      } else if (r == 6) {
        EXPECT_NEAR(v, ref[t * rows + r], 1e-6) << "t " << t;
      } else {
        EXPECT_EQ(v, 0.0f) << "t " << t << " r " << r;
      }
    }
}

// Where the prompt path does not apply, n_prompt changes nothing: a job
// mixing f16 and quantized targets, and a level without the path.
TEST(PromptFallback, GivesTheOtherPathsBitForBit) {
  if (active_isa() != Isa::avx512) GTEST_SKIP() << "no prompt path below the avx512 level";
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
    const llmserve::testing::IsaGuard avx2(Isa::avx2);
    EXPECT_EQ(prompt_path(TensorType::F16), PromptPath::none);
    matmul(wf, x.data(), n, f1.data(), pool, n);
    std::vector<float> plain(24 * n);
    matmul(wf, x.data(), n, plain.data(), pool);
    EXPECT_EQ(f1, plain);
  }
}

}  // namespace
}  // namespace llmserve::kernels
