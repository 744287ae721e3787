#include "gguf/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/fp16.h"

namespace llmserve::gguf {

namespace {

std::string type_name(TensorType type) {
  if (const auto info = type_info(type)) return std::string(info->name);
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

// Blocks of a row of n elements, or an Error naming the operation.
int64_t blocks_in_row(const char* what, TensorType type, int64_t n, int block_elems) {
  if (n < 0 || n % block_elems != 0) {
    throw Error(std::string(what) + ": row of " + std::to_string(n) + " elements is not a multiple of the " +
                type_name(type) + " block size " + std::to_string(block_elems));
  }
  return n / block_elems;
}

// Blocks are copied out rather than dereferenced in place: tensor data in a
// mapped file (or a fuzzer's buffer) need not be aligned for uint16_t fields.
template <typename Block>
Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * sizeof(Block), sizeof(Block));
  return b;
}

template <typename Block>
void store_block(void* dst, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(dst) + i * sizeof(Block), &b, sizeof(Block));
}

// The 5-bit formats keep the 32 high bits of a block as one little-endian u32.
uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// ---- elementwise types ---------------------------------------------------

void dequantize_f32(const void* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, n * sizeof(float));
}

template <float (*Convert)(uint16_t)>
void dequantize_half(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = Convert(h);
  }
}

// ---- 32-element blocks: q = nibble (plus a fifth bit), x = d*q (+ m) -------

// Element j (0..15) of a Q4/Q5 block is the low nibble of qs[j]; element j+16
// is the high nibble of qs[j].
void dequantize_q4_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK4_0) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      dst[j] = d * ((b.qs[j] & 0x0f) - 8);
      dst[j + QK4_0 / 2] = d * ((b.qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK4_1) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      dst[j] = d * (b.qs[j] & 0x0f) + m;
      dst[j + QK4_1 / 2] = d * (b.qs[j] >> 4) + m;
    }
  }
}

// Bit j of qh is the fifth bit of element j, bit j+16 that of element j+16.
void dequantize_q5_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK5_0) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int lo = (b.qs[j] & 0x0f) | ((qh >> j) & 1) << 4;
      const int hi = (b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * (lo - 16);
      dst[j + QK5_0 / 2] = d * (hi - 16);
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK5_1) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int lo = (b.qs[j] & 0x0f) | ((qh >> j) & 1) << 4;
      const int hi = (b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * lo + m;
      dst[j + QK5_1 / 2] = d * hi + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK8_0) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < QK8_0; ++j) dst[j] = d * b.qs[j];
  }
}

// ---- 256-element super-blocks ------------------------------------------

// Q4_K/Q5_K pack eight 6-bit (scale, min) pairs into 12 bytes: bytes 0..3 hold
// scales 0..3 in their low 6 bits, bytes 4..7 mins 0..3; sub-blocks 4..7 take
// their low 4 bits from the nibbles of bytes 8..11 and their top 2 bits from
// the spare top bits of bytes 0..3 (scales) and 4..7 (mins).
void scale_min_k4(int j, const uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
    min = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

// Each 64 elements share 32 bytes of qs: the low nibbles are sub-block 2c,
// the high nibbles sub-block 2c+1. x = d*scale*q - dmin*min.
void dequantize_q4_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int c = 0; c < QK_K / 64; ++c, dst += 64) {
      int sc0, m0, sc1, m1;
      scale_min_k4(2 * c, b.scales, sc0, m0);
      scale_min_k4(2 * c + 1, b.scales, sc1, m1);
      const uint8_t* qs = b.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        dst[l] = d * sc0 * (qs[l] & 0x0f) - dmin * m0;
        dst[l + 32] = d * sc1 * (qs[l] >> 4) - dmin * m1;
      }
    }
  }
}

// As Q4_K, plus a fifth bit: qh[l] bit 2c is the high bit of element l of
// sub-block 2c, bit 2c+1 that of element l of sub-block 2c+1.
void dequantize_q5_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int c = 0; c < QK_K / 64; ++c, dst += 64) {
      int sc0, m0, sc1, m1;
      scale_min_k4(2 * c, b.scales, sc0, m0);
      scale_min_k4(2 * c + 1, b.scales, sc1, m1);
      const uint8_t* qs = b.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        const int lo = (qs[l] & 0x0f) | ((b.qh[l] >> (2 * c)) & 1) << 4;
        const int hi = (qs[l] >> 4) | ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
        dst[l] = d * sc0 * lo - dmin * m0;
        dst[l + 32] = d * sc1 * hi - dmin * m1;
      }
    }
  }
}

// Two halves of 128 elements, each with 64 bytes of ql, 32 of qh and 8
// scales (one per 16 elements). In a half, element l + 32k (k = 0..3) takes
// its low 4 bits from ql[l] (k even) or ql[l+32] (k odd), low nibble for
// k < 2 and high nibble otherwise, and its top 2 bits from bits 2k..2k+1 of
// qh[l]; x = d * scale * (q - 32).
void dequantize_q6_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int half = 0; half < 2; ++half, dst += 128) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q0 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
        const int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
        const int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        dst[l] = d * sc[s + 0] * q0;
        dst[l + 32] = d * sc[s + 2] * q1;
        dst[l + 64] = d * sc[s + 4] * q2;
        dst[l + 96] = d * sc[s + 6] * q3;
      }
    }
  }
}

// ---- quantization ---------------------------------------------------------

// float -> int in [lo, hi] with NaN mapped to `nan_value`: ggml's reference
// converts without a check, which is undefined behaviour for NaN or inf input.
int clamp_to_int(float v, int lo, int hi, int nan_value) {
  if (std::isnan(v)) return nan_value;
  return static_cast<int>(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi)));
}

template <uint16_t (*Encode)(float)>
void quantize_half(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Encode(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// d = amax/127, q = round(x/d) (halves away from zero), as ggml's reference.
void quantize_q8_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) {
      b.qs[j] = static_cast<int8_t>(clamp_to_int(std::round(src[j] * id), -127, 127, 0));
    }
    store_block(dst, i, b);
  }
}

// ggml's convention: d = max / -8 where max is the signed value of largest
// magnitude, so that value maps exactly to q = 0 and the other side gets the
// extra level; q = floor(x/d + 8.5) clamped to 15 (ggml's truncating cast of
// a non-negative value, i.e. rounding halves up).
void quantize_q4_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += QK4_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b;
    b.d = f32_to_f16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = clamp_to_int(std::floor(src[j] * id + 8.5f), 0, 15, 8);
      const int hi = clamp_to_int(std::floor(src[j + QK4_0 / 2] * id + 8.5f), 0, 15, 8);
      b.qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
    store_block(dst, i, b);
  }
}

// The K-quants, for gen-model's synthetic models: a plain min/max fit per
// sub-block, then the sub-block scales rounded up to the super-block's 6-
// or 8-bit grid. ggml's quantizers search each sub-block's scale for the least
// squared error; the formats, not that search, are what the kernels are
// measured and tested on.

// round(v) as an int in [lo, hi], NaN as 0.
int round_to_int(float v, int lo, int hi) { return clamp_to_int(std::round(v), lo, hi, 0); }
// The grid point at or above v: a sub-block's step or offset rounded up, so
// that its values still fit the code range.
int ceil_to_int(float v, int lo, int hi) { return clamp_to_int(std::ceil(v), lo, hi, 0); }

// Q4_K: x ~= d * sc[j] * q - dmin * m[j] over 8 sub-blocks of 32, q in
// 0..15, sc and m 6-bit, packed as scale_min_k4 unpacks them.
void quantize_q4_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += QK_K) {
    float scale[8], min[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;  // the range includes 0: m >= 0
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, src[32 * j + l]);
        hi = std::max(hi, src[32 * j + l]);
      }
      scale[j] = (hi - lo) / 15;
      min[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, min[j]);
    }
    BlockQ4_K b{};
    b.d = f32_to_f16(max_scale / 63);
    b.dmin = f32_to_f16(max_min / 63);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(d > 0 ? ceil_to_int(scale[j] / d, 0, 63) : 0);
      m[j] = static_cast<uint8_t>(dmin > 0 ? ceil_to_int(min[j] / dmin, 0, 63) : 0);
    }
    for (int j = 0; j < 4; ++j) {
      b.scales[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
      b.scales[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
      b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    for (int j = 0; j < 8; ++j) {
      const float step = d * sc[j], offset = dmin * m[j];
      for (int l = 0; l < 32; ++l) {
        const int q = step > 0 ? round_to_int((src[32 * j + l] + offset) / step, 0, 15) : 0;
        // Sub-blocks 2c and 2c+1 share bytes 32c..32c+31: low, high nibble.
        b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>(q << (4 * (j % 2)));
      }
    }
    store_block(dst, i, b);
  }
}

// Q6_K: x ~= d * scales[j] * (q - 32) over 16 sub-blocks of 16, q in 0..63,
// laid out as dequantize_q6_k reads it.
void quantize_q6_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += QK_K) {
    float scale[16], max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(src[16 * j + l]));
      scale[j] = amax / 31;
      max_scale = std::max(max_scale, scale[j]);
    }
    BlockQ6_K b{};
    b.d = f32_to_f16(max_scale / 127);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(d > 0 ? ceil_to_int(scale[j] / d, 0, 127) : 0);
    for (int e = 0; e < QK_K; ++e) {
      const float step = d * b.scales[e / 16];
      const int q = (step > 0 ? round_to_int(src[e] / step, -32, 31) : 0) + 32;
      // Element e = 128 h + 32 k + l: low bits in ql[64 h + l + 32 (k % 2)]
      // (k < 2: low nibble), high bits in qh[32 h + l] at bit 2k.
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      b.ql[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q & 15) << (4 * (k / 2)));
      b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
    }
    store_block(dst, i, b);
  }
}

}  // namespace

size_t row_bytes(TensorType type, uint64_t n) {
  const auto info = type_info(type);
  if (!info) throw Error("row_bytes: unsupported tensor " + type_name(type));
  if (n % info->block_elems != 0) {
    throw Error("row_bytes: row of " + std::to_string(n) + " elements is not a multiple of the " +
                std::string(info->name) + " block size " + std::to_string(info->block_elems));
  }
  const uint64_t blocks = n / info->block_elems;
  if (blocks > std::numeric_limits<size_t>::max() / info->block_bytes) {
    throw Error("row_bytes: row of " + std::to_string(n) + " " + std::string(info->name) +
                " elements does not fit in memory");
  }
  return blocks * info->block_bytes;
}

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  constexpr const char* what = "dequantize_row";
  switch (type) {
    case TensorType::F32: return dequantize_f32(src, dst, blocks_in_row(what, type, n, 1));
    case TensorType::F16: return dequantize_half<f16_to_f32>(src, dst, blocks_in_row(what, type, n, 1));
    case TensorType::BF16: return dequantize_half<bf16_to_f32>(src, dst, blocks_in_row(what, type, n, 1));
    case TensorType::Q4_0: return dequantize_q4_0(src, dst, blocks_in_row(what, type, n, QK4_0));
    case TensorType::Q4_1: return dequantize_q4_1(src, dst, blocks_in_row(what, type, n, QK4_1));
    case TensorType::Q5_0: return dequantize_q5_0(src, dst, blocks_in_row(what, type, n, QK5_0));
    case TensorType::Q5_1: return dequantize_q5_1(src, dst, blocks_in_row(what, type, n, QK5_1));
    case TensorType::Q8_0: return dequantize_q8_0(src, dst, blocks_in_row(what, type, n, QK8_0));
    case TensorType::Q4_K: return dequantize_q4_k(src, dst, blocks_in_row(what, type, n, QK_K));
    case TensorType::Q5_K: return dequantize_q5_k(src, dst, blocks_in_row(what, type, n, QK_K));
    case TensorType::Q6_K: return dequantize_q6_k(src, dst, blocks_in_row(what, type, n, QK_K));
    default: break;
  }
  throw Error("dequantize_row: tensor " + type_name(type) + " is not supported");
}

bool can_quantize(TensorType type) {
  switch (type) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_K:
    case TensorType::Q6_K: return true;
    default: return false;
  }
}

void quantize_row(TensorType type, const float* src, void* dst, int64_t n) {
  constexpr const char* what = "quantize_row";
  switch (type) {
    case TensorType::F32: {
      const int64_t count = blocks_in_row(what, type, n, 1);
      if (count > 0) std::memcpy(dst, src, count * sizeof(float));
      return;
    }
    case TensorType::F16:
      return quantize_half<f32_to_f16>(src, dst, blocks_in_row(what, type, n, 1));
    case TensorType::BF16:
      return quantize_half<f32_to_bf16>(src, dst, blocks_in_row(what, type, n, 1));
    case TensorType::Q8_0: return quantize_q8_0(src, dst, blocks_in_row(what, type, n, QK8_0));
    case TensorType::Q4_0: return quantize_q4_0(src, dst, blocks_in_row(what, type, n, QK4_0));
    case TensorType::Q4_K: return quantize_q4_k(src, dst, blocks_in_row(what, type, n, QK_K));
    case TensorType::Q6_K: return quantize_q6_k(src, dst, blocks_in_row(what, type, n, QK_K));
    default: break;
  }
  throw Error("quantize_row: cannot quantize to " + type_name(type));
}

}  // namespace llmserve::gguf
