#pragma once
// Writes GGUF v3 files: metadata of every value type (nested arrays
// included) and tensors aligned to `general.alignment` (default 32).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/file.h"

namespace llmserve::gguf {

class Writer {
 public:
  // Fills dst with the bytes of rows [first_row, first_row + n_rows) of a
  // streamed tensor (n_rows * row_bytes(type, dims[0]) bytes). write() calls
  // it in row order, a chunk at a time, so a multi-GB tensor never has to be
  // held in memory.
  using RowSource = std::function<void(uint64_t first_row, uint64_t n_rows, uint8_t* dst)>;

  void set(std::string key, Value value);  // replaces an existing key
  // `data` must hold exactly row_bytes(type, dims[0]) * rows bytes; it is copied.
  void add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type,
                  std::vector<uint8_t> data);
  // A tensor whose bytes `source` produces while write() runs.
  void add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type, RowSource source);
  // Writes atomically (temp file + rename). Throws Error naming the path.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    uint64_t n_bytes;
    std::vector<uint8_t> data;  // empty when `source` produces the bytes
    RowSource source;
  };
  Tensor& new_tensor(std::string name, std::vector<uint64_t> dims, TensorType type);

  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Tensor> tensors_;
};

// Value builders for the common cases.
Value make_u32(uint32_t v);
Value make_i32(int32_t v);
Value make_f32(float v);
Value make_bool(bool v);
Value make_string(std::string v);
Value make_array(ValueType elem_type, std::vector<Value> items);

}  // namespace llmserve::gguf
