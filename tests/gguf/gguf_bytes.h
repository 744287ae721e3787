#pragma once
// Hand-assembled GGUF bytes for tests: independent of gguf::Writer, so tests
// can state the expected encoding and build files no writer would produce
// (hostile counts, bad types, misaligned offsets).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::testing {

class GgufBytes {
 public:
  GgufBytes& u8(uint8_t v) { return raw(&v, 1); }
  GgufBytes& u32(uint32_t v) { return le(v, 4); }
  GgufBytes& u64(uint64_t v) { return le(v, 8); }
  GgufBytes& i32(int32_t v) { return le(static_cast<uint32_t>(v), 4); }
  GgufBytes& f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return u32(bits);
  }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  GgufBytes& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  // "GGUF", version, tensor count, kv count.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  // A key with a u32 value (value type 4).
  GgufBytes& kv_u32(std::string_view key, uint32_t v) {
    str(key);
    u32(4);
    return u32(v);
  }
  // Tensor info: name, n_dims, dims, type, offset.
  GgufBytes& tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    u32(type);
    return u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;

 private:
  GgufBytes& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
};

}  // namespace llmserve::testing
