#pragma once
// Read-only view of a GGUF file (versions 2 and 3), memory-mapped.
//
// Everything read from the file is bounds-checked: a truncated, corrupt or
// hostile file throws llmserve::Error naming the file and the problem, and no
// count from the file is trusted before it is checked against the bytes that
// remain (so a hostile count cannot trigger a huge allocation).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/types.h"

namespace llmserve::gguf {

struct Value;

struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;
};

// One metadata value. Integers keep their signedness class; all are widened.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  bool is_integer() const;
  bool is_number() const;  // integer or float
  // Typed accessors: throw Error("<key>: expected ..., got ...") on mismatch.
  // `key` only makes the message useful.
  int64_t as_int(std::string_view key) const;      // any integer that fits in int64
  uint64_t as_uint(std::string_view key) const;    // any non-negative integer
  double as_float(std::string_view key) const;     // any number
  bool as_bool(std::string_view key) const;
  const std::string& as_string(std::string_view key) const;
  const Array& as_array(std::string_view key) const;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] (ne0) is the contiguous one
  TensorType type = TensorType::F32;
  uint64_t offset = 0;   // from the start of the data section, as stored
  uint64_t n_elems = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping (or memory buffer)

  uint64_t rows() const;  // product of dims[1..]; 1 for a vector
  uint64_t cols() const { return dims.empty() ? 1 : dims[0]; }
};

class File {
 public:
  // Maps and parses `path`. Throws Error("<path>: <problem>").
  static File open(const std::string& path);
  // Parses a buffer the caller keeps alive (tests, fuzzing). `name` is used in errors.
  static File parse(std::string name, const uint8_t* bytes, size_t size);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  size_t size() const { return size_; }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Required keys: throw Error("<path>: missing metadata key <key>") when absent.
  const Value& require(std::string_view key) const;
  // Convenience getters with a default for absent keys (type mismatch still throws).
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key, double fallback) const;
  std::string get_string(std::string_view key, std::string fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent

  // Once the tensors have been copied out (the model repacks its weights at
  // load), their mapped pages leave this process's resident memory: they
  // stay in the page cache and are read again from it if touched.
  void release_tensor_pages() const;

 private:
  File() = default;
  void parse_all();
  template <typename Get>
  auto typed(std::string_view key, Get get) const -> decltype(get(std::declval<const Value&>()));

  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string name_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace llmserve::gguf
