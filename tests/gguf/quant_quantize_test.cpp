// Encoding rows: known blocks, round-trip error bounds, and the f16 / bf16
// conversions' edge cases (subnormals, overflow, NaN, ties to even).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "gguf/quant.h"

namespace llmserve::gguf {
namespace {

uint16_t to_f16(float x) {
  uint16_t h;
  quantize_row(TensorType::F16, &x, &h, 1);
  return h;
}

uint16_t to_bf16(float x) {
  uint16_t h;
  quantize_row(TensorType::BF16, &x, &h, 1);
  return h;
}

TEST(QuantizeF16, RoundsToNearestEvenAndHandlesSpecials) {
  EXPECT_EQ(to_f16(1.0f), 0x3c00);
  EXPECT_EQ(to_f16(-2.0f), 0xc000);
  EXPECT_EQ(to_f16(-0.0f), 0x8000);
  EXPECT_EQ(to_f16(65504.0f), 0x7bff);                      // largest finite
  EXPECT_EQ(to_f16(65519.0f), 0x7bff);                      // below the halfway point
  EXPECT_EQ(to_f16(65520.0f), 0x7c00);                      // halfway to 2^16: rounds to even = inf
  EXPECT_EQ(to_f16(1e10f), 0x7c00);
  EXPECT_EQ(to_f16(-INFINITY), 0xfc00);
  const uint16_t nan = to_f16(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even mantissa stays
  EXPECT_EQ(to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd mantissa rounds up
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // just above the tie
}

TEST(QuantizeF16, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest half subnormal
  EXPECT_EQ(to_f16(tiny), 0x0001);
  EXPECT_EQ(to_f16(1023 * tiny), 0x03ff);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(to_f16(tiny / 2), 0x0000);               // tie between 0 and 1 ulp: even is 0
  EXPECT_EQ(to_f16(tiny * 0.51f), 0x0001);
  EXPECT_EQ(to_f16(tiny * 1.5f), 0x0002);  // tie between 1 and 2 ulp: even is 2
  EXPECT_EQ(to_f16(tiny * 2.5f), 0x0002);  // tie between 2 and 3 ulp: even is 2
  EXPECT_EQ(to_f16(-tiny), 0x8001);
  EXPECT_EQ(to_f16(1e-10f), 0x0000);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -14) - tiny / 2), 0x0400);  // tie at the top of the subnormals, rounds up
}

TEST(QuantizeF16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) continue;  // NaN payloads need not survive
    float f;
    dequantize_row(TensorType::F16, &h, &f, 1);
    EXPECT_EQ(to_f16(f), h) << std::hex << h;
  }
}

TEST(QuantizeBF16, RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even stays
  EXPECT_EQ(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(to_bf16(3.4028235e38f), 0x7f80);  // FLT_MAX rounds up to inf
  EXPECT_EQ(to_bf16(-0.0f), 0x8000);
  const uint16_t nan = to_bf16(NAN);
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A NaN whose payload lives only in the low 16 bits must not become inf.
  float low_payload_nan;
  const uint32_t bits = 0x7f800001;
  std::memcpy(&low_payload_nan, &bits, 4);
  EXPECT_NE(to_bf16(low_payload_nan) & 0x007f, 0);
  float subnormal;
  const uint32_t sub_bits = 0x00010000;
  std::memcpy(&subnormal, &sub_bits, 4);
  EXPECT_EQ(to_bf16(subnormal), 0x0001);
}

TEST(QuantizeQ8_0, KnownBlock) {
  // amax = 127 makes d = 1 exactly, so q = round(x) with halves away from zero.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 20);
  x[0] = 127.0f;
  x[1] = -2.5f;
  x[2] = 2.5f;
  x[3] = 0.49f;
  x[4] = -100.6f;
  BlockQ8_0 b;
  quantize_row(TensorType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], -3);
  EXPECT_EQ(b.qs[2], 3);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], -101);
  for (int j = 5; j < 32; ++j) EXPECT_EQ(b.qs[j], j - 20);
}

TEST(QuantizeQ8_0, ZeroBlockHasZeroScale) {
  float x[32] = {};
  BlockQ8_0 b;
  std::memset(&b, 0xff, sizeof b);
  quantize_row(TensorType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int8_t q : b.qs) EXPECT_EQ(q, 0);
}

TEST(QuantizeQ4_0, NegativeExtremeSetsPositiveScale) {
  // max (largest magnitude) = -8 -> d = -8 / -8 = 1; q = floor(x + 8.5) clamped to 15.
  float x[32] = {};
  x[0] = -8.0f;   // q 0
  x[1] = 7.0f;    // q 15
  x[2] = 7.6f;    // 16 clamps to 15
  x[3] = 0.5f;    // tie rounds up: 9
  x[4] = -0.5f;   // tie rounds up: 8
  x[5] = -3.4f;   // 5
  x[16] = 2.0f;   // q 10, high nibble of byte 0
  x[31] = -7.5f;  // tie rounds up: 1, high nibble of byte 15
  BlockQ4_0 b;
  quantize_row(TensorType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 0x00 | 10 << 4);
  EXPECT_EQ(b.qs[1], 15 | 8 << 4);
  EXPECT_EQ(b.qs[2], 15 | 8 << 4);
  EXPECT_EQ(b.qs[3], 9 | 8 << 4);
  EXPECT_EQ(b.qs[4], 8 | 8 << 4);
  EXPECT_EQ(b.qs[5], 5 | 8 << 4);
  EXPECT_EQ(b.qs[15], 8 | 1 << 4);
}

TEST(QuantizeQ4_0, PositiveExtremeSetsNegativeScale) {
  // max = 8 -> d = -1: the positive extreme maps to q 0 and -8 clamps to 15.
  float x[32] = {};
  x[0] = 8.0f;
  x[1] = -7.0f;
  x[2] = -8.0f;
  BlockQ4_0 b;
  quantize_row(TensorType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0xbc00);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[1] & 0x0f, 15);
  EXPECT_EQ(b.qs[2] & 0x0f, 15);
  EXPECT_EQ(b.qs[3] & 0x0f, 8);
}

std::vector<float> gaussian(size_t n, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_trip(TensorType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(type, x.size()));
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  dequantize_row(type, q.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

float block_amax(const std::vector<float>& x, size_t block) {
  float amax = 0;
  for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[block * 32 + j]));
  return amax;
}

TEST(QuantizeQ8_0, RoundTripErrorWithinHalfStep) {
  const auto x = gaussian(32 * 512, 0.02f, 1);
  const auto y = round_trip(TensorType::Q8_0, x);
  for (size_t i = 0; i < x.size(); ++i) {
    // Half a step of d = amax/127, plus the f16 rounding of d (2^-11 relative) times |q| <= 127.
    const float step = block_amax(x, i / 32) / 127;
    ASSERT_LE(std::fabs(x[i] - y[i]), step * (0.5f + 127 * std::ldexp(1.0f, -11)) + 1e-9f) << i;
  }
}

TEST(QuantizeQ4_0, RoundTripErrorWithinOneStep) {
  const auto x = gaussian(32 * 512, 1.0f, 2);
  const auto y = round_trip(TensorType::Q4_0, x);
  double sum_sq = 0, sum_step_sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float step = block_amax(x, i / 32) / 8;
    // Half a step except at the clamped end, where it can be a whole step.
    ASSERT_LE(std::fabs(x[i] - y[i]), step * (1 + 16 * std::ldexp(1.0f, -11)) + 1e-6f) << i;
    sum_sq += double(x[i] - y[i]) * (x[i] - y[i]);
    sum_step_sq += double(step) * step;
  }
  // Rounding error is about uniform over a step: rms ~ step / sqrt(12) ~ 0.29 step.
  EXPECT_LT(std::sqrt(sum_sq / sum_step_sq), 0.35);
}

// rms(x - y) / rms(x) over rows of N(0, 1) values.
double relative_rms_error(TensorType type, uint64_t seed) {
  const auto x = gaussian(256 * 64, 1.0f, seed);
  const auto y = round_trip(type, x);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += double(x[i] - y[i]) * (x[i] - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// A sub-block of 32 steps of 1/15 from 0 (Q4_K) or of 16 from -32 to 31
// (Q6_K) needs no rounding; the plain fits give step/sqrt(12) of rms error
// on gaussian data: about 0.09 of sigma for 4 bits (range ~5 sigma), 0.013
// for 6 bits (62 steps over ~5 sigma, each sub-block its own).
TEST(QuantizeQ4_K, RoundTripErrorIsAQuantizationStep) {
  EXPECT_LT(relative_rms_error(TensorType::Q4_K, 3), 0.12);
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) / 8;  // 0, 1/8 .. 15/8
  BlockQ4_K b;
  quantize_row(TensorType::Q4_K, x.data(), &b, 256);
  std::vector<float> y(256);
  dequantize_row(TensorType::Q4_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], x[i], 2e-3f) << i;
}

TEST(QuantizeQ6_K, RoundTripErrorIsAQuantizationStep) {
  EXPECT_LT(relative_rms_error(TensorType::Q6_K, 4), 0.03);
  // Each value within half of its sub-block's step (d * scale): the steps
  // are rounded up, so no value is clamped.
  const auto x = gaussian(256 * 8, 1.0f, 5);
  std::vector<BlockQ6_K> b(x.size() / 256);
  quantize_row(TensorType::Q6_K, x.data(), b.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  dequantize_row(TensorType::Q6_K, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float step = f16_to_f32(b[i / 256].d) * b[i / 256].scales[i % 256 / 16];
    ASSERT_LE(std::fabs(x[i] - y[i]), step * 0.5001f) << i;
  }
}

TEST(Quantize, HalfAndBF16RowsRoundTripRepresentableValues) {
  // Exactly representable in f16 and in bf16.
  const std::vector<float> x = {0.0f, 1.0f, -0.5f, 1024.0f, 0.125f, -49152.0f};
  for (TensorType t : {TensorType::F16, TensorType::BF16, TensorType::F32}) {
    std::vector<uint8_t> buf(row_bytes(t, x.size()));
    quantize_row(t, x.data(), buf.data(), static_cast<int64_t>(x.size()));
    std::vector<float> y(x.size());
    dequantize_row(t, buf.data(), y.data(), static_cast<int64_t>(y.size()));
    EXPECT_EQ(x, y) << static_cast<int>(t);
  }
}

TEST(Quantize, NonFiniteInputsDoNotCrash) {
  std::vector<float> x(64, 1.0f);
  x[3] = NAN;
  x[40] = INFINITY;
  uint8_t buf[2 * sizeof(BlockQ8_0)];
  quantize_row(TensorType::Q8_0, x.data(), buf, 64);
  quantize_row(TensorType::Q4_0, x.data(), buf, 64);
  std::vector<float> k(256, 1.0f);
  k[7] = NAN;
  k[100] = -INFINITY;
  uint8_t kbuf[sizeof(BlockQ6_K)];
  quantize_row(TensorType::Q4_K, k.data(), kbuf, 256);
  quantize_row(TensorType::Q6_K, k.data(), kbuf, 256);
}

TEST(Quantize, SupportedTypesOnly) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                       TensorType::Q4_K, TensorType::Q6_K})
    EXPECT_TRUE(can_quantize(t));
  for (TensorType t : {TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_K}) {
    EXPECT_FALSE(can_quantize(t));
    float x[256] = {};
    uint8_t out[512];
    EXPECT_THROW(quantize_row(t, x, out, 256), Error);
  }
  float x[33] = {};
  uint8_t out[64];
  EXPECT_THROW(quantize_row(TensorType::Q8_0, x, out, 33), Error);
}

}  // namespace
}  // namespace llmserve::gguf
