#include "gguf/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"

namespace llmserve::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;               // ggml's limit
constexpr int kMaxArrayDepth = 8;         // nested arrays deeper than this are hostile
// Cap on metadata values in one file. Real vocabularies hold well under a
// million; this bounds the memory a hostile file can make us allocate.
constexpr uint64_t kMaxMetadataValues = 4u << 20;

// A bounds-checked little-endian reader over the file's bytes.
class Cursor {
 public:
  Cursor(const std::string& name, const uint8_t* bytes, size_t size)
      : name_(name), bytes_(bytes), size_(size) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " +
                std::to_string(size_) + ")");
  }

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) fail(std::string("file is truncated while reading ") + what);
    T v;
    std::memcpy(&v, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail(std::string(what) + " claims " + std::to_string(len) + " bytes but only " +
           std::to_string(remaining()) + " remain");
    std::string s(reinterpret_cast<const char*>(bytes_ + pos_), len);
    pos_ += len;
    return s;
  }

  // A count of items each at least `min_item_bytes` long must fit in what remains.
  uint64_t read_count(const char* what, uint64_t min_item_bytes) {
    const uint64_t n = read<uint64_t>(what);
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes)
      fail(std::string(what) + " is " + std::to_string(n) + ", more than the file can hold");
    return n;
  }

 private:
  const std::string& name_;
  const uint8_t* bytes_;
  size_t size_;
  size_t pos_ = 0;
};

// Smallest encoding of one value of `t`, used to sanity-check array counts.
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;  // element type + count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

class MetadataParser {
 public:
  explicit MetadataParser(Cursor& c) : c_(c) {}

  Value read_value(ValueType type, int depth) {
    if (++n_values_ > kMaxMetadataValues)
      c_.fail("metadata holds more than " + std::to_string(kMaxMetadataValues) + " values");
    Value v;
    v.type = type;
    switch (type) {
      case ValueType::UINT8: v.data = uint64_t{c_.read<uint8_t>("uint8 value")}; break;
      case ValueType::INT8: v.data = int64_t{c_.read<int8_t>("int8 value")}; break;
      case ValueType::UINT16: v.data = uint64_t{c_.read<uint16_t>("uint16 value")}; break;
      case ValueType::INT16: v.data = int64_t{c_.read<int16_t>("int16 value")}; break;
      case ValueType::UINT32: v.data = uint64_t{c_.read<uint32_t>("uint32 value")}; break;
      case ValueType::INT32: v.data = int64_t{c_.read<int32_t>("int32 value")}; break;
      case ValueType::UINT64: v.data = c_.read<uint64_t>("uint64 value"); break;
      case ValueType::INT64: v.data = c_.read<int64_t>("int64 value"); break;
      case ValueType::FLOAT32: v.data = double{c_.read<float>("float32 value")}; break;
      case ValueType::FLOAT64: v.data = c_.read<double>("float64 value"); break;
      case ValueType::BOOL: {
        const uint8_t b = c_.read<uint8_t>("bool value");
        if (b > 1) c_.fail("bool value is " + std::to_string(b) + ", not 0 or 1");
        v.data = b == 1;
        break;
      }
      case ValueType::STRING: v.data = c_.read_string("string value"); break;
      case ValueType::ARRAY: {
        if (depth >= kMaxArrayDepth) c_.fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
        const uint32_t et = c_.read<uint32_t>("array element type");
        if (!valid_value_type(et)) c_.fail("unknown array element type " + std::to_string(et));
        Array a;
        a.elem_type = static_cast<ValueType>(et);
        const uint64_t n = c_.read_count("array length", min_value_bytes(a.elem_type));
        // The count is checked against the bytes left, but each item costs a
        // whole Value here: reserve a bounded amount and let the rest grow.
        a.items.reserve(std::min<uint64_t>(n, 1u << 16));
        for (uint64_t i = 0; i < n; ++i) a.items.push_back(read_value(a.elem_type, depth + 1));
        v.data = std::move(a);
        break;
      }
    }
    return v;
  }

 private:
  Cursor& c_;
  uint64_t n_values_ = 0;
};

std::string describe(const Value& v) { return std::string(value_type_name(v.type)); }

[[noreturn]] void mismatch(std::string_view key, const char* want, const Value& v) {
  throw Error("metadata " + std::string(key) + ": expected " + want + ", got " + describe(v));
}

}  // namespace

// ---- Value -----------------------------------------------------------------

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}
bool Value::is_number() const { return is_integer() || std::holds_alternative<double>(data); }

int64_t Value::as_int(std::string_view key) const {
  if (const auto* s = std::get_if<int64_t>(&data)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) mismatch(key, "an int64", *this);
    return static_cast<int64_t>(*u);
  }
  mismatch(key, "an integer", *this);
}

uint64_t Value::as_uint(std::string_view key) const {
  if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (const auto* s = std::get_if<int64_t>(&data)) {
    if (*s < 0) mismatch(key, "a non-negative integer", *this);
    return static_cast<uint64_t>(*s);
  }
  mismatch(key, "an unsigned integer", *this);
}

double Value::as_float(std::string_view key) const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* s = std::get_if<int64_t>(&data)) return static_cast<double>(*s);
  mismatch(key, "a number", *this);
}

bool Value::as_bool(std::string_view key) const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  mismatch(key, "a bool", *this);
}

const std::string& Value::as_string(std::string_view key) const {
  if (const auto* s = std::get_if<std::string>(&data)) return *s;
  mismatch(key, "a string", *this);
}

const Array& Value::as_array(std::string_view key) const {
  if (const auto* a = std::get_if<Array>(&data)) return *a;
  mismatch(key, "an array", *this);
}

uint64_t TensorInfo::rows() const {
  uint64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

// ---- File ------------------------------------------------------------------

struct File::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  File f;
  f.name_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    throw Error(path + ": file is empty, not a GGUF model");
  }
  void* addr = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) throw Error(path + ": cannot map file: " + std::strerror(errno));
  f.mapping_ = std::make_unique<Mapping>();
  f.mapping_->addr = addr;
  f.mapping_->size = f.size_;
  f.bytes_ = static_cast<const uint8_t*>(addr);
  f.parse_all();
  return f;
}

void File::release_tensor_pages() const {
  if (!mapping_) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(bytes_) + data_offset_ + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(bytes_) + size_) / page * page;
  // Advice only: a private read-only mapping reads the file again after it.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

File File::parse(std::string name, const uint8_t* bytes, size_t size) {
  File f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  f.size_ = size;
  f.parse_all();
  return f;
}

void File::parse_all() {
  Cursor c(name_, bytes_, size_);
  if (size_ < 4 || c.read<uint32_t>("magic") != kMagic) c.fail("not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  // Each tensor info takes at least 8+4+8+4+8 bytes; each key/value at least 8+4+1.
  const uint64_t n_tensors = c.read_count("tensor count", 32);
  const uint64_t n_kv = c.read_count("metadata key count", 13);

  MetadataParser values(c);
  std::unordered_set<std::string> keys;
  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!valid_value_type(t)) c.fail("metadata " + key + " has unknown value type " + std::to_string(t));
    if (!keys.insert(key).second) c.fail("metadata key " + key + " appears twice");
    Value v = values.read_value(static_cast<ValueType>(t), 0);
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    const auto* u = std::get_if<uint64_t>(&a->data);
    if (!u) c.fail("general.alignment must be an unsigned integer, got " + describe(*a));
    const uint64_t align = *u;
    if (align == 0 || (align & (align - 1)) != 0 || align > (1u << 30))
      c.fail("general.alignment " + std::to_string(align) + " is not a power of two");
    alignment_ = align;
  }

  std::unordered_set<std::string> names;
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.read_string("tensor name");
    const std::string what = "tensor " + t.name;
    if (!names.insert(t.name).second) c.fail(what + " appears twice");
    const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail(what + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    t.n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>("tensor dimension");
      if (dim == 0 || dim > (uint64_t{1} << 40) || t.n_elems > (uint64_t{1} << 50) / dim)
        c.fail(what + " has an invalid dimension " + std::to_string(dim));
      t.n_elems *= dim;
      t.dims.push_back(dim);
    }
    const uint32_t type = c.read<uint32_t>("tensor type");
    const auto info = type_info(static_cast<TensorType>(type));
    if (!info) c.fail(what + " has unsupported type id " + std::to_string(type));
    t.type = info->type;
    if (t.dims[0] % info->block_elems != 0)
      c.fail(what + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
             std::string(info->name) + " block size " + std::to_string(info->block_elems));
    t.n_bytes = t.n_elems / info->block_elems * info->block_bytes;
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0)
      c.fail(what + " offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(alignment_));
    tensors_.push_back(std::move(t));
  }

  const uint64_t pad = (alignment_ - c.pos() % alignment_) % alignment_;
  data_offset_ = c.pos() + pad;
  for (auto& t : tensors_) {
    if (data_offset_ > size_ || t.offset > size_ - data_offset_ || t.n_bytes > size_ - data_offset_ - t.offset)
      throw Error(name_ + ": tensor " + t.name + " (offset " + std::to_string(t.offset) + ", " +
                  std::to_string(t.n_bytes) + " bytes) extends past the end of the file (" +
                  std::to_string(size_) + " bytes); the file is truncated or corrupt");
    t.data = bytes_ + data_offset_ + t.offset;
  }
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const Value& File::require(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw Error(name_ + ": missing metadata key " + std::string(key));
}

// The typed getters name the file in their errors, which Value cannot.
template <typename Get>
auto File::typed(std::string_view key, Get get) const -> decltype(get(std::declval<const Value&>())) {
  try {
    return get(require(key));
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with(name_)) throw;
    throw Error(name_ + ": " + e.what());
  }
}

int64_t File::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? typed(key, [&](const Value& v) { return v.as_int(key); }) : fallback;
}

double File::get_float(std::string_view key, double fallback) const {
  return has(key) ? typed(key, [&](const Value& v) { return v.as_float(key); }) : fallback;
}

std::string File::get_string(std::string_view key, std::string fallback) const {
  return has(key) ? typed(key, [&](const Value& v) { return v.as_string(key); }) : fallback;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace llmserve::gguf
