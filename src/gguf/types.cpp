#include "gguf/types.h"

#include <array>
#include <cctype>

namespace llmserve::gguf {

namespace {

constexpr std::array<TypeInfo, 12> kTypes = {{
    {TensorType::F32, "f32", 1, 4},
    {TensorType::F16, "f16", 1, 2},
    {TensorType::BF16, "bf16", 1, 2},
    {TensorType::Q4_0, "q4_0", 32, 18},
    {TensorType::Q4_1, "q4_1", 32, 20},
    {TensorType::Q5_0, "q5_0", 32, 22},
    {TensorType::Q5_1, "q5_1", 32, 24},
    {TensorType::Q8_0, "q8_0", 32, 34},
    {TensorType::Q4_K, "q4_k", 256, 144},
    {TensorType::Q5_K, "q5_k", 256, 176},
    {TensorType::Q6_K, "q6_k", 256, 210},
    {TensorType::Q8_K, "q8_k", 256, 292},
}};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::optional<TypeInfo> type_info(TensorType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  return std::nullopt;
}

std::optional<TypeInfo> type_info_by_name(std::string_view name) {
  for (const auto& t : kTypes)
    if (iequal(t.name, name)) return t;
  return std::nullopt;
}

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

}  // namespace llmserve::gguf
