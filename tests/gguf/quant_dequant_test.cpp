// Each block format decodes hand-built blocks to values worked out by hand
// from ggml's published layouts (not by calling the code under test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "gguf/quant.h"

namespace llmserve::gguf {
namespace {

// Half-precision bit patterns used as scales below.
constexpr uint16_t kHalf_0_125 = 0x3000, kHalf_0_25 = 0x3400, kHalf_0_5 = 0x3800, kHalf_1 = 0x3c00,
                   kHalf_2 = 0x4000, kHalf_m1 = 0xbc00;

template <typename Block>
std::vector<float> decode(TensorType type, const std::vector<Block>& blocks, int block_elems) {
  std::vector<float> out(blocks.size() * block_elems, -12345.0f);
  dequantize_row(type, blocks.data(), out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(Dequantize, F32CopiesAndToleratesUnalignedSource) {
  const float values[3] = {1.5f, -0.0f, 3e38f};
  std::vector<uint8_t> buf(1 + sizeof values);
  std::memcpy(buf.data() + 1, values, sizeof values);
  float out[3];
  dequantize_row(TensorType::F32, buf.data() + 1, out, 3);
  EXPECT_EQ(std::memcmp(out, values, sizeof values), 0);
}

TEST(Dequantize, F16KnownPatterns) {
  const uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3555};
  float out[std::size(h)];
  dequantize_row(TensorType::F16, h, out, std::size(h));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(out[4], 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(out[5], std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(out[6], 0.0f);
  EXPECT_TRUE(std::signbit(out[6]));
  EXPECT_EQ(out[7], INFINITY);
  EXPECT_EQ(out[8], -INFINITY);
  EXPECT_TRUE(std::isnan(out[9]));
  EXPECT_EQ(out[10], 0.25f * (1 + 0x155 / 1024.0f));  // exponent 13 - 15, mantissa 0x155
}

TEST(Dequantize, BF16KnownPatterns) {
  const uint16_t b[] = {0x3f80, 0xc040, 0x7f80, 0x7fc0, 0x0001, 0x8000};
  float out[std::size(b)];
  dequantize_row(TensorType::BF16, b, out, std::size(b));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], INFINITY);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], std::ldexp(1.0f, -133));  // f32 subnormal 0x00010000
  EXPECT_TRUE(std::signbit(out[5]));
}

TEST(Dequantize, Q4_0LowNibblesFirstHalfHighNibblesSecondHalf) {
  BlockQ4_0 b{};
  b.d = kHalf_0_5;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto out = decode(TensorType::Q4_0, std::vector{b}, 32);
  // x = d * (q - 8)
  const float expected[32] = {-4,   -3.5, -3,   -2.5, -2,   -1.5, -1,   -0.5, 0,  0.5,  1,    1.5, 2,  2.5, 3, 3.5,
                              3.5,  3,    2.5,  2,    1.5,  1,    0.5,  0,    -0.5, -1, -1.5, -2,  -2.5, -3, -3.5, -4};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(Dequantize, Q4_1AddsMin) {
  BlockQ4_1 b{};
  b.d = kHalf_0_25;
  b.m = kHalf_m1;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto out = decode(TensorType::Q4_1, std::vector{b}, 32);
  // x = d * q + m
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * j - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.25f * (15 - j) - 1.0f) << j;
  }
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[16], 2.75f);
}

// Fifth bits for elements 0, 16 and 31: qh is a little-endian u32 whose bit
// i belongs to element i.
constexpr uint8_t kQh_0_16_31[4] = {0x01, 0x00, 0x01, 0x80};

TEST(Dequantize, Q5_0FifthBitFromLittleEndianQh) {
  BlockQ5_0 b{};
  b.d = kHalf_0_5;
  std::memcpy(b.qh, kQh_0_16_31, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x53;  // low nibble 3, high nibble 5
  const auto out = decode(TensorType::Q5_0, std::vector{b}, 32);
  // x = d * (q - 16): low elements q = 3 (or 19 with the fifth bit), high q = 5 (or 21).
  for (int i = 0; i < 32; ++i) {
    float want = i < 16 ? 0.5f * (3 - 16) : 0.5f * (5 - 16);
    if (i == 0) want = 0.5f * 3;
    if (i == 16 || i == 31) want = 0.5f * 5;
    EXPECT_EQ(out[i], want) << i;
  }
}

TEST(Dequantize, Q5_1FifthBitAndMin) {
  BlockQ5_1 b{};
  b.d = kHalf_2;
  b.m = kHalf_0_5;
  std::memcpy(b.qh, kQh_0_16_31, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x53;
  const auto out = decode(TensorType::Q5_1, std::vector{b}, 32);
  // x = d * q + m
  for (int i = 0; i < 32; ++i) {
    float want = i < 16 ? 2 * 3 + 0.5f : 2 * 5 + 0.5f;
    if (i == 0) want = 2 * 19 + 0.5f;
    if (i == 16 || i == 31) want = 2 * 21 + 0.5f;
    EXPECT_EQ(out[i], want) << i;
  }
}

TEST(Dequantize, Q8_0TwoBlocks) {
  BlockQ8_0 a{}, b{};
  a.d = kHalf_0_125;
  b.d = kHalf_m1;
  for (int j = 0; j < 32; ++j) {
    a.qs[j] = static_cast<int8_t>(j * 8 - 128);
    b.qs[j] = static_cast<int8_t>(127 - j);
  }
  const auto out = decode(TensorType::Q8_0, std::vector{a, b}, 32);
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[16], 0.0f);
  EXPECT_EQ(out[31], 15.0f);
  EXPECT_EQ(out[32], -127.0f);
  EXPECT_EQ(out[63], -96.0f);
}

// The 12 scale bytes of a K-quant block for sub-block scales
// {1,2,3,4,33,34,35,63} and mins {5,6,7,8,40,41,42,50}, packed by hand:
// bytes 0..3 = scale[j] | (scale[j+4] >> 4) << 6, bytes 4..7 = min[j] |
// (min[j+4] >> 4) << 6, bytes 8..11 = (scale[j+4] & 15) | (min[j+4] & 15) << 4.
constexpr uint8_t kScales[12] = {0x81, 0x82, 0x83, 0xc4, 0x85, 0x86, 0x87, 0xc8, 0x81, 0x92, 0xa3, 0x2f};
constexpr int kScale[8] = {1, 2, 3, 4, 33, 34, 35, 63};
constexpr int kMin[8] = {5, 6, 7, 8, 40, 41, 42, 50};

TEST(Dequantize, Q4_KSixBitScalesAndNibbleOrder) {
  BlockQ4_K b{};
  b.d = kHalf_1;
  b.dmin = kHalf_0_5;
  std::memcpy(b.scales, kScales, 12);
  // Byte l of each 32-byte group: low nibble l % 16, high nibble 15 - l % 16.
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4);
  const auto out = decode(TensorType::Q4_K, std::vector{b}, 256);
  // Sub-block s = element / 32; even s read low nibbles, odd s high nibbles.
  // x = d * scale[s] * q - dmin * min[s]
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    const int q = s % 2 == 0 ? l % 16 : 15 - l % 16;
    EXPECT_EQ(out[e], 1.0f * kScale[s] * q - 0.5f * kMin[s]) << e;
  }
  EXPECT_EQ(out[0], -2.5f);               // 1*0 - 0.5*5
  EXPECT_EQ(out[255], 63.0f * 0 - 25.0f);  // last element: high nibble 15 - 15
  EXPECT_EQ(out[224], 63.0f * 15 - 25.0f);
}

TEST(Dequantize, Q5_KFifthBitPerSubBlock) {
  BlockQ5_K b{};
  b.d = kHalf_0_5;
  b.dmin = kHalf_1;
  std::memcpy(b.scales, kScales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4);
  // qh[l] bit s is the fifth bit of element l of sub-block s: set it only where s == l % 8.
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(1 << (l % 8));
  const auto out = decode(TensorType::Q5_K, std::vector{b}, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    const int q = (s % 2 == 0 ? l % 16 : 15 - l % 16) + (s == l % 8 ? 16 : 0);
    EXPECT_EQ(out[e], 0.5f * kScale[s] * q - 1.0f * kMin[s]) << e;
  }
  EXPECT_EQ(out[0], 0.5f * 1 * 16 - 5);  // element 0 of sub-block 0 has its fifth bit
  EXPECT_EQ(out[1], 0.5f * 1 * 1 - 5);
}

TEST(Dequantize, Q6_KQuartersOfEachHalf) {
  BlockQ6_K b{};
  b.d = kHalf_0_5;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      b.ql[64 * h + l] = static_cast<uint8_t>((l % 16) | 2 << 4);
      b.ql[64 * h + 32 + l] = 3 | 4 << 4;
      b.qh[32 * h + l] = 0xe4;  // top-bit pairs 0, 1, 2, 3 for quarters 0..3
    }
  }
  const auto out = decode(TensorType::Q6_K, std::vector{b}, 256);
  // Quarter k of a half: k=0 low nibble of ql[l] | 0<<4, k=1 low nibble of
  // ql[l+32] | 1<<4 = 19, k=2 high nibble of ql[l] | 2<<4 = 34, k=3 high
  // nibble of ql[l+32] | 3<<4 = 52. x = d * scale[e / 16] * (q - 32).
  for (int e = 0; e < 256; ++e) {
    const int k = (e % 128) / 32, l = e % 32;
    const int q = k == 0 ? l % 16 : k == 1 ? 19 : k == 2 ? 34 : 52;
    EXPECT_EQ(out[e], 0.5f * (e / 16 - 8) * (q - 32)) << e;
  }
  EXPECT_EQ(out[0], 0.5f * -8 * -32);
  EXPECT_EQ(out[255], 0.5f * 7 * 20);
}

TEST(Dequantize, KQuantSecondBlockUsesItsOwnScale) {
  BlockQ6_K a{}, b{};
  a.d = kHalf_1;
  b.d = kHalf_2;
  for (int s = 0; s < 16; ++s) a.scales[s] = b.scales[s] = 1;
  const auto out = decode(TensorType::Q6_K, std::vector{a, b}, 256);  // all q = 0 -> -32
  EXPECT_EQ(out[0], -32.0f);
  EXPECT_EQ(out[256], -64.0f);
  EXPECT_EQ(out[511], -64.0f);
}

TEST(Dequantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(1024);
  EXPECT_THROW(dequantize_row(TensorType::Q4_0, src.data(), dst.data(), 33), Error);
  EXPECT_THROW(dequantize_row(TensorType::Q6_K, src.data(), dst.data(), 128), Error);
  EXPECT_THROW(dequantize_row(TensorType::F32, src.data(), dst.data(), -1), Error);
  EXPECT_THROW(dequantize_row(TensorType::Q2_K, src.data(), dst.data(), 256), Error);
  EXPECT_THROW(dequantize_row(static_cast<TensorType>(99), src.data(), dst.data(), 32), Error);
  dequantize_row(TensorType::Q8_0, src.data(), dst.data(), 0);  // an empty row is fine
}

TEST(RowBytes, BlockGeometry) {
  EXPECT_EQ(row_bytes(TensorType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(TensorType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(TensorType::BF16, 7), 14u);
  EXPECT_EQ(row_bytes(TensorType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(TensorType::Q4_1, 64), 40u);
  EXPECT_EQ(row_bytes(TensorType::Q5_0, 32), 22u);
  EXPECT_EQ(row_bytes(TensorType::Q5_1, 32), 24u);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 4096), 128u * 34);
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(TensorType::Q5_K, 256), 176u);
  EXPECT_EQ(row_bytes(TensorType::Q6_K, 256), 210u);
}

TEST(RowBytes, RejectsBadRows) {
  EXPECT_THROW(row_bytes(TensorType::Q8_0, 33), Error);
  EXPECT_THROW(row_bytes(TensorType::Q4_K, 32), Error);
  EXPECT_THROW(row_bytes(static_cast<TensorType>(1000), 32), Error);
  EXPECT_THROW(row_bytes(TensorType::Q8_0, ~uint64_t{31}), Error);  // 2^59 - 1 blocks of 34 bytes overflow size_t
  try {
    row_bytes(TensorType::Q4_0, 31);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmserve::gguf
