#include "gguf/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "gguf/quant.h"

namespace llmserve::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
// ggml keeps tensor names in a 64-byte buffer including the terminating NUL
// and supports at most 4 dimensions; other GGUF readers reject anything more.
constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxDims = 4;
// Streamed tensors are produced in chunks of about this many bytes.
constexpr uint64_t kChunkBytes = 8u << 20;

// Little-endian serialization into a growing buffer, whatever the host order.
class Encoder {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    const U u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  void put_f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put(bits);
  }
  void put_f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put(bits);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Either integer alternative is accepted as long as it fits the declared type.
template <typename T>
T integer_as(const Value& v, const std::string& where) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(*u);
  } else if (const auto* s = std::get_if<int64_t>(&v.data)) {
    const bool fits = std::is_signed_v<T> ? (*s >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                             *s <= static_cast<int64_t>(std::numeric_limits<T>::max()))
                                          : (*s >= 0 && static_cast<uint64_t>(*s) <= std::numeric_limits<T>::max());
    if (fits) return static_cast<T>(*s);
  } else {
    throw Error(where + ": " + std::string(value_type_name(v.type)) + " value does not hold an integer");
  }
  throw Error(where + ": value out of range for " + std::string(value_type_name(v.type)));
}

template <typename Alt>
const Alt& holds(const Value& v, const std::string& where) {
  if (const auto* p = std::get_if<Alt>(&v.data)) return *p;
  throw Error(where + ": " + std::string(value_type_name(v.type)) + " value holds the wrong kind of data");
}

// Encodes the payload of `v` (not its type tag). `where` names the key and
// array index for error messages.
void encode_value(Encoder& out, const Value& v, const std::string& where) {
  switch (v.type) {
    case ValueType::UINT8: return out.put(integer_as<uint8_t>(v, where));
    case ValueType::INT8: return out.put(integer_as<int8_t>(v, where));
    case ValueType::UINT16: return out.put(integer_as<uint16_t>(v, where));
    case ValueType::INT16: return out.put(integer_as<int16_t>(v, where));
    case ValueType::UINT32: return out.put(integer_as<uint32_t>(v, where));
    case ValueType::INT32: return out.put(integer_as<int32_t>(v, where));
    case ValueType::UINT64: return out.put(integer_as<uint64_t>(v, where));
    case ValueType::INT64: return out.put(integer_as<int64_t>(v, where));
    case ValueType::FLOAT32: return out.put_f32(static_cast<float>(holds<double>(v, where)));
    case ValueType::FLOAT64: return out.put_f64(holds<double>(v, where));
    case ValueType::BOOL: return out.put<uint8_t>(holds<bool>(v, where) ? 1 : 0);
    case ValueType::STRING: return out.put_string(holds<std::string>(v, where));
    case ValueType::ARRAY: {
      const Array& a = holds<Array>(v, where);
      out.put(static_cast<uint32_t>(a.elem_type));
      out.put<uint64_t>(a.items.size());
      for (size_t i = 0; i < a.items.size(); ++i) {
        const std::string item_where = where + "[" + std::to_string(i) + "]";
        if (a.items[i].type != a.elem_type) {
          throw Error(item_where + ": " + std::string(value_type_name(a.items[i].type)) + " item in an array of " +
                      std::string(value_type_name(a.elem_type)));
        }
        encode_value(out, a.items[i], item_where);
      }
      return;
    }
  }
  throw Error(where + ": unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

uint64_t alignment_of(const std::vector<std::pair<std::string, Value>>& metadata, const std::string& path) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    // Other readers only honour a u32 alignment: any other type would make
    // them place the data section elsewhere than we do.
    if (value.type != ValueType::UINT32) throw Error(path + ": general.alignment must be a uint32");
    const uint64_t a = integer_as<uint32_t>(value, path + ": general.alignment");
    if (a == 0 || (a & (a - 1)) != 0) {
      throw Error(path + ": general.alignment " + std::to_string(a) + " is not a power of two");
    }
    return a;
  }
  return kDefaultAlignment;
}

// A file descriptor that is closed, and whose file is removed, unless the
// write completes.
class TempFile {
 public:
  explicit TempFile(const std::string& final_path) : final_(final_path) {
    static std::atomic<unsigned> counter{0};
    tmp_ = final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create " + tmp_);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write failed");
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void zeros(size_t n) {
    static const uint8_t kZeros[256] = {};
    while (n > 0) {
      const size_t k = std::min(n, sizeof kZeros);
      write(kZeros, k);
      n -= k;
    }
  }
  // fsync before rename so a crash never leaves a complete-looking but empty file.
  void commit() {
    if (::fsync(fd_) != 0) fail("fsync failed");
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("close failed");
    if (::rename(tmp_.c_str(), final_.c_str()) != 0) fail("cannot rename " + tmp_ + " to it");
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(final_ + ": " + what + ": " + std::strerror(errno));
  }
  std::string final_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void Writer::set(std::string key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

Writer::Tensor& Writer::new_tensor(std::string name, std::vector<uint64_t> dims, TensorType type) {
  if (name.empty() || name.size() > kMaxNameLength) {
    throw Error("tensor name '" + name + "' must be 1.." + std::to_string(kMaxNameLength) + " bytes");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) throw Error("tensor " + name + " added twice");
  }
  if (dims.empty() || dims.size() > kMaxDims) {
    throw Error("tensor " + name + ": " + std::to_string(dims.size()) + " dimensions (1.." +
                std::to_string(kMaxDims) + " supported)");
  }
  uint64_t n_bytes = row_bytes(type, dims[0]);
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != 0 && n_bytes > std::numeric_limits<uint64_t>::max() / dims[i]) {
      throw Error("tensor " + name + ": size overflows");
    }
    n_bytes *= dims[i];
  }
  tensors_.push_back(Tensor{std::move(name), std::move(dims), type, n_bytes, {}, {}});
  return tensors_.back();
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type, std::vector<uint8_t> data) {
  Tensor& t = new_tensor(std::move(name), std::move(dims), type);
  if (data.size() != t.n_bytes) {
    const std::string message = "tensor " + t.name + ": " + std::to_string(data.size()) + " bytes of data, expected " +
                                std::to_string(t.n_bytes);
    tensors_.pop_back();
    throw Error(message);
  }
  t.data = std::move(data);
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type, RowSource source) {
  if (!source) throw Error("tensor " + name + ": no row source");
  new_tensor(std::move(name), std::move(dims), type).source = std::move(source);
}

void Writer::write(const std::string& path) const {
  const uint64_t alignment = alignment_of(metadata_, path);

  Encoder header;
  header.put(kMagic);
  header.put(kVersion);
  header.put<uint64_t>(tensors_.size());
  header.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    header.put_string(key);
    header.put(static_cast<uint32_t>(value.type));
    encode_value(header, value, path + ": metadata " + key);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const auto& t : tensors_) {
    header.put_string(t.name);
    header.put(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) header.put(d);
    header.put(static_cast<uint32_t>(t.type));
    header.put(offset);
    offset += align_up(t.n_bytes, alignment);
  }
  header.pad_to(alignment);

  TempFile file(path);
  file.write(header.bytes().data(), header.bytes().size());
  std::vector<uint8_t> chunk;
  for (const auto& t : tensors_) {
    if (!t.source) {
      file.write(t.data.data(), t.data.size());
    } else {
      const uint64_t per_row = row_bytes(t.type, t.dims[0]);
      const uint64_t rows = per_row == 0 ? 0 : t.n_bytes / per_row;
      const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / std::max<uint64_t>(per_row, 1));
      for (uint64_t first = 0; first < rows; first += rows_per_chunk) {
        const uint64_t n = std::min(rows_per_chunk, rows - first);
        chunk.assign(n * per_row, 0);
        t.source(first, n, chunk.data());
        file.write(chunk.data(), chunk.size());
      }
    }
    file.zeros(align_up(t.n_bytes, alignment) - t.n_bytes);
  }
  file.commit();
}

Value make_u32(uint32_t v) { return Value{ValueType::UINT32, uint64_t{v}}; }
Value make_i32(int32_t v) { return Value{ValueType::INT32, int64_t{v}}; }
Value make_f32(float v) { return Value{ValueType::FLOAT32, double{v}}; }
Value make_bool(bool v) { return Value{ValueType::BOOL, v}; }
Value make_string(std::string v) { return Value{ValueType::STRING, std::move(v)}; }
Value make_array(ValueType elem_type, std::vector<Value> items) {
  return Value{ValueType::ARRAY, Array{elem_type, std::move(items)}};
}

}  // namespace llmserve::gguf
