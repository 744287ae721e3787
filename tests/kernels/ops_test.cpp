// Row ops on every ISA path against reference:: (double accumulation).
// Tolerances are relative: |y - ref| <= tol * (|ref| + scale), with tol a few
// float ulps times the op's depth (2e-6 for add and the polynomial exp,
// 1e-5 for sums over a row).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "core/fp16.h"
#include "kernels/ops.h"

namespace llmserve::kernels {
namespace {

using llmserve::testing::IsaGuard;
using llmserve::testing::random_floats;

class OpsTest : public ::testing::TestWithParam<Isa> {};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, double scale = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), tol * (std::fabs(want[i]) + scale)) << "at " << i << ": " << got[i] << " vs " << want[i];
}

// Sizes around every vector width, plus model sizes.
const int64_t kSizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 768, 2048, 5632};

TEST_P(OpsTest, RmsNorm) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(1);
  for (int64_t dim : kSizes) {
    const int64_t rows = 3;
    const auto x = random_floats(rng, dim * rows, 2.0f), w = random_floats(rng, dim);
    std::vector<float> got(x.size()), want(x.size());
    rmsnorm(x.data(), w.data(), 1e-5f, dim, rows, got.data());
    reference::rmsnorm(x.data(), w.data(), 1e-5f, dim, rows, want.data());
    expect_close(got, want, 1e-5);
    std::vector<float> in_place = x;  // output may alias the input
    rmsnorm(in_place.data(), w.data(), 1e-5f, dim, rows, in_place.data());
    EXPECT_EQ(in_place, got);
  }
}

TEST_P(OpsTest, Softmax) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(2);
  for (int64_t n : kSizes) {
    auto x = random_floats(rng, n, 5.0f);
    x[0] += 40.0f;  // a dominant entry: the rest underflow towards 0
    auto want = x;
    softmax(x.data(), n);
    reference::softmax(want.data(), n);
    expect_close(x, want, 1e-5, 1e-7);
  }
  std::vector<float> masked = {1.0f, -INFINITY, 2.0f, -INFINITY};
  softmax(masked.data(), 4);
  EXPECT_EQ(masked[1], 0.0f);
  EXPECT_NEAR(masked[0] + masked[2], 1.0f, 1e-6);
}

TEST_P(OpsTest, Argmax) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(6);
  for (int64_t n : kSizes) {
    auto x = random_floats(rng, n, 3.0f);
    EXPECT_EQ(argmax(x.data(), n), std::max_element(x.begin(), x.end()) - x.begin()) << "n " << n;
    const float top = *std::max_element(x.begin(), x.end()) + 1.0f;
    x[static_cast<size_t>(n - 1)] = top;  // in the last, partial vector
    EXPECT_EQ(argmax(x.data(), n), n - 1) << "n " << n;
    x[static_cast<size_t>(n / 2)] = top;  // a tie: the first wins
    EXPECT_EQ(argmax(x.data(), n), n / 2) << "n " << n;
  }
  const std::vector<float> masked = {-INFINITY, -INFINITY, -3.0f, INFINITY, INFINITY};
  EXPECT_EQ(argmax(masked.data(), 2), 0);
  EXPECT_EQ(argmax(masked.data(), 3), 2);
  EXPECT_EQ(argmax(masked.data(), 5), 3);
  const std::vector<float> with_nan = {1.0f, NAN, 2.0f, NAN};
  for (int64_t n = 1; n <= 4; ++n) {
    const int64_t i = argmax(with_nan.data() + 4 - n, n);
    EXPECT_TRUE(i >= 0 && i < n) << "n " << n;
  }
}

TEST_P(OpsTest, SiluMul) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(3);
  for (int64_t n : kSizes) {
    auto gate = random_floats(rng, n, 4.0f);
    if (n > 3) gate[0] = -100.0f, gate[1] = 100.0f, gate[2] = 0.0f;  // saturation and zero
    const auto up = random_floats(rng, n);
    std::vector<float> got(n), want(n);
    silu_mul(gate.data(), up.data(), n, got.data());
    reference::silu_mul(gate.data(), up.data(), n, want.data());
    expect_close(got, want, 2e-6, 1e-30);
  }
}

TEST_P(OpsTest, Add) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(4);
  for (int64_t n : kSizes) {
    const auto a = random_floats(rng, n), b = random_floats(rng, n);
    std::vector<float> got(n), want(n);
    add(a.data(), b.data(), n, got.data());
    reference::add(a.data(), b.data(), n, want.data());
    EXPECT_EQ(got, want);  // one rounding either way: exact
  }
}

// Bit for bit the scalar reference conversion (gguf's F16 rows), including
// ties (round to even), overflow to infinity, half subnormals and zeros.
TEST_P(OpsTest, ToF16) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(5);
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, -1e6f, INFINITY, -INFINITY,
                          6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f, -3e-6f, 1e-9f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                          2049.0f, 2051.0f};
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
  while (x.size() < 5000) x.push_back((rng() % 2 ? 1.0f : -1.0f) * std::exp2(exponent(rng)));
  for (int64_t n : kSizes) {
    if (n > static_cast<int64_t>(x.size())) continue;
    std::vector<uint16_t> got(n);
    to_f16(x.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], f32_to_f16(x[i])) << "at " << i << ": " << x[i];
  }
  std::vector<uint16_t> all(x.size());
  to_f16(x.data(), static_cast<int64_t>(x.size()), all.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(all[i], f32_to_f16(x[i])) << "at " << i << ": " << x[i];
  const float nan = NAN;
  uint16_t h = 0;
  to_f16(&nan, 1, &h);
  EXPECT_TRUE(std::isnan(f16_to_f32(h)));
}

// Exact: integer sums, over lengths around the vector width, values at the
// ends of the range, and the longest allowed row of +-127 (the int32 bound).
TEST_P(OpsTest, DotI8) {
  IsaGuard guard(GetParam());
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> code(-127, 127);
  auto expected = [](const std::vector<int8_t>& a, const std::vector<int8_t>& b, int64_t n) {
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += int64_t{a[i]} * b[i];
    return sum;
  };
  for (int64_t n : {0, 1, 31, 32, 33, 63, 64, 65, 100, 1024, 4096, 4099}) {
    std::vector<int8_t> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<int8_t>(code(rng)), b[i] = static_cast<int8_t>(code(rng));
    ASSERT_EQ(dot_i8(a.data(), b.data(), n), expected(a, b, n)) << n;
  }
  const int64_t longest = int64_t{1} << 17;
  std::vector<int8_t> a(longest, 127), b(longest, 127);
  EXPECT_EQ(dot_i8(a.data(), b.data(), longest), expected(a, b, longest));
  std::fill(b.begin(), b.end(), -127);
  EXPECT_EQ(dot_i8(a.data(), b.data(), longest), expected(a, b, longest));
}

INSTANTIATE_TEST_SUITE_P(Isas, OpsTest, ::testing::ValuesIn(llmserve::testing::runnable_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace llmserve::kernels
