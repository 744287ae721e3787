#pragma once
// Quantized block layouts (bit-exact with ggml's published formats) and
// scalar conversion of rows to and from f32. These are the reference
// conversions every kernel is tested against.
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace llmserve::gguf {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

// All `d`/`m` fields are IEEE half stored as uint16_t.
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[QK4_1 / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[QK8_0]; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Bytes of a row of `n` elements; n must be a multiple of the block size.
size_t row_bytes(TensorType type, uint64_t n);

// dst[0..n) = src decoded. n must be a multiple of the type's block size.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);

// Encode n floats. Supported for F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K
// (what gen-model and the KV cache write); throws Error for other types.
void quantize_row(TensorType type, const float* src, void* dst, int64_t n);
bool can_quantize(TensorType type);

}  // namespace llmserve::gguf
