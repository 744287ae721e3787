#pragma once
// GGUF enumerations and the tensor types' block geometry, as published in the
// GGUF specification (ggml's docs/gguf.md) and ggml's block layouts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace llmserve::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// Elements per block and bytes per block of a tensor type.
struct TypeInfo {
  TensorType type;
  std::string_view name;  // "f32", "q8_0", ... as in llama.cpp's file naming
  uint32_t block_elems;
  uint32_t block_bytes;
};

// nullopt for a type id this build does not support.
std::optional<TypeInfo> type_info(TensorType type);
std::optional<TypeInfo> type_info_by_name(std::string_view name);  // case-insensitive
std::string_view value_type_name(ValueType type);

}  // namespace llmserve::gguf
