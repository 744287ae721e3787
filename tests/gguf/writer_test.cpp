// gguf::Writer: the exact bytes of a small file, a round trip of every value
// type and several tensor types through gguf::File, streamed tensors, and
// the errors a caller can make.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"
#include "gguf/writer.h"
#include "gguf_bytes.h"
#include "temp_file.h"

namespace llmserve::gguf {
namespace {

namespace fs = std::filesystem;

// Each test writes into a folder of its own, removed however the test ends.
class WriterTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }

  llmserve::testing::TempDir dir_{std::string("writer-") +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Value u64v(ValueType t, uint64_t v) { return Value{t, v}; }
Value i64v(ValueType t, int64_t v) { return Value{t, v}; }
Value f64v(ValueType t, double v) { return Value{t, v}; }

// Values equal in type and content; floats compare by bits so NaN and -0 count.
bool same(const Value& a, const Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<double>(&a.data)) {
    const double y = std::get<double>(b.data);
    return std::memcmp(x, &y, sizeof y) == 0;
  }
  if (const auto* x = std::get_if<Array>(&a.data)) {
    const Array& y = std::get<Array>(b.data);
    if (x->elem_type != y.elem_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!same(x->items[i], y.items[i])) return false;
    return true;
  }
  if (const auto* x = std::get_if<std::string>(&a.data)) return *x == std::get<std::string>(b.data);
  if (const auto* x = std::get_if<uint64_t>(&a.data)) return *x == std::get<uint64_t>(b.data);
  if (const auto* x = std::get_if<int64_t>(&a.data)) return *x == std::get<int64_t>(b.data);
  return std::get<bool>(a.data) == std::get<bool>(b.data);
}

TEST_F(WriterTest, ExactBytesOfASmallFile) {
  Writer w;
  w.set("a", make_u32(7));
  w.add_tensor("t", {2}, TensorType::F32, as_bytes(std::vector<float>{1.0f, 2.0f}));
  w.write(path("small.gguf"));

  testing::GgufBytes want;
  want.header(1, 1).kv_u32("a", 7).tensor("t", {2}, 0, 0).pad_to(32);
  ASSERT_EQ(want.bytes.size(), 96u);  // 74 bytes of header padded to 32
  want.f32(1.0f).f32(2.0f).pad_to(32);
  EXPECT_EQ(read_all(path("small.gguf")), want.bytes);
}

TEST_F(WriterTest, EveryValueTypeAndSeveralTensorTypesRoundTrip) {
  std::vector<std::pair<std::string, Value>> meta = {
      {"general.alignment", make_u32(64)},
      {"u8", u64v(ValueType::UINT8, 255)},
      {"i8", i64v(ValueType::INT8, -128)},
      {"u16", u64v(ValueType::UINT16, 65535)},
      {"i16", i64v(ValueType::INT16, -32768)},
      {"u32", make_u32(4294967295u)},
      {"i32", make_i32(std::numeric_limits<int32_t>::min())},
      {"f32", make_f32(1.5f)},
      {"f32.neg_zero", make_f32(-0.0f)},
      {"f32.nan", make_f32(std::numeric_limits<float>::quiet_NaN())},
      {"bool.true", make_bool(true)},
      {"bool.false", make_bool(false)},
      {"string", make_string("h\xc3\xa9llo \xe2\x96\x81world")},
      {"string.empty", make_string("")},
      {"string.nul", make_string(std::string("a\0b", 3))},
      {"u64", u64v(ValueType::UINT64, std::numeric_limits<uint64_t>::max())},
      {"i64", i64v(ValueType::INT64, std::numeric_limits<int64_t>::min())},
      {"f64", f64v(ValueType::FLOAT64, 3.141592653589793)},
      {"array.u8", make_array(ValueType::UINT8, {u64v(ValueType::UINT8, 1), u64v(ValueType::UINT8, 2)})},
      {"array.empty", make_array(ValueType::FLOAT32, {})},
      {"array.strings", make_array(ValueType::STRING, {make_string("<unk>"), make_string(""), make_string("\xe2\x96\x81the")})},
      {"array.f32", make_array(ValueType::FLOAT32, {make_f32(-1000.0f), make_f32(0.25f)})},
      {"array.bool", make_array(ValueType::BOOL, {make_bool(true), make_bool(false)})},
      {"array.nested",
       make_array(ValueType::ARRAY,
                  {make_array(ValueType::INT32, {make_i32(1), make_i32(-2)}), make_array(ValueType::STRING, {}),
                   make_array(ValueType::ARRAY, {make_array(ValueType::UINT64, {u64v(ValueType::UINT64, 9)})})})},
  };
  Writer w;
  for (const auto& [k, v] : meta) w.set(k, v);

  std::vector<float> f32(5 * 3);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.5f * i - 3;
  std::vector<uint8_t> f16(row_bytes(TensorType::F16, 64) * 2), q8(row_bytes(TensorType::Q8_0, 64) * 3),
      q4(row_bytes(TensorType::Q4_0, 32)), q6k(row_bytes(TensorType::Q6_K, 256) * 2), bf16(row_bytes(TensorType::BF16, 8));
  for (auto* buf : {&f16, &q8, &q4, &q6k, &bf16})
    for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = static_cast<uint8_t>(i * 131 + buf->size());
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::vector<uint8_t> data;
  };
  const std::vector<T> tensors = {
      {"f32", {5, 3}, TensorType::F32, as_bytes(f32)},     {"f16", {64, 2}, TensorType::F16, f16},
      {"q8_0", {64, 3, 1}, TensorType::Q8_0, q8},          {"q4_0", {32}, TensorType::Q4_0, q4},
      {"q6_k", {256, 1, 2, 1}, TensorType::Q6_K, q6k},     {"bf16", {8}, TensorType::BF16, bf16},
  };
  for (const auto& t : tensors) w.add_tensor(t.name, t.dims, t.type, t.data);
  w.write(path("all.gguf"));

  const File f = File::open(path("all.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  ASSERT_EQ(f.metadata().size(), meta.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, meta[i].first);
    EXPECT_TRUE(same(f.metadata()[i].second, meta[i].second)) << meta[i].first;
  }
  ASSERT_EQ(f.tensors().size(), tensors.size());
  uint64_t end = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& got = f.tensors()[i];
    EXPECT_EQ(got.name, tensors[i].name);
    EXPECT_EQ(got.dims, tensors[i].dims);
    EXPECT_EQ(got.type, tensors[i].type);
    EXPECT_EQ(got.offset % 64, 0u) << got.name;
    EXPECT_GE(got.offset, end) << got.name << " overlaps the previous tensor";
    ASSERT_EQ(got.n_bytes, tensors[i].data.size());
    EXPECT_EQ(std::memcmp(got.data, tensors[i].data.data(), got.n_bytes), 0) << got.name;
    end = got.offset + got.n_bytes;
  }
  EXPECT_EQ(f.size(), f.data_offset() + (end + 63) / 64 * 64);

  // Writing is deterministic.
  w.write(path("again.gguf"));
  EXPECT_EQ(read_all(path("all.gguf")), read_all(path("again.gguf")));
}

TEST_F(WriterTest, SetReplacesAnExistingKeyInPlace) {
  Writer w;
  w.set("a", make_u32(1));
  w.set("b", make_u32(2));
  w.set("a", make_string("x"));
  w.write(path("f.gguf"));
  const File f = File::open(path("f.gguf"));
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.require("a").as_string("a"), "x");
}

TEST_F(WriterTest, StreamedTensorIsProducedInRowOrderChunks) {
  // 600 rows of 16 KiB: more than one 8 MiB chunk.
  constexpr uint64_t cols = 4096, rows = 600;
  auto value = [](uint64_t r, uint64_t c) { return static_cast<float>(r * 7 + c % 13); };
  uint64_t next_row = 0;
  int calls = 0;
  Writer w;
  w.add_tensor("small", {32}, TensorType::F32, std::vector<uint8_t>(128, 1));
  w.add_tensor("big", {cols, rows}, TensorType::F32, [&](uint64_t first, uint64_t n, uint8_t* dst) {
    EXPECT_EQ(first, next_row);
    next_row += n;
    ++calls;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < cols; ++c) {
        const float v = value(first + r, c);
        std::memcpy(dst + (r * cols + c) * 4, &v, 4);
      }
  });
  w.write(path("stream.gguf"));
  EXPECT_EQ(next_row, rows);
  EXPECT_GT(calls, 1);

  const File f = File::open(path("stream.gguf"));
  const TensorInfo* t = f.find_tensor("big");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->n_bytes, cols * rows * 4);
  for (uint64_t r = 0; r < rows; r += 37) {
    float v;
    std::memcpy(&v, t->data + (r * cols + 5) * 4, 4);
    EXPECT_EQ(v, value(r, 5));
  }
}

TEST_F(WriterTest, ReplacesAnExistingFileAndLeavesNoTemporaries) {
  Writer a, b;
  a.set("x", make_u32(1));
  b.set("x", make_u32(2));
  a.write(path("f.gguf"));
  b.write(path("f.gguf"));
  EXPECT_EQ(File::open(path("f.gguf")).require("x").as_uint("x"), 2u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 1);
}

TEST_F(WriterTest, FailedWriteNamesThePathAndLeavesNothing) {
  Writer w;
  w.set("x", make_u32(1));
  const std::string bad = path("missing_dir/f.gguf");
  try {
    w.write(bad);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  // A failing row source aborts the write without touching the target.
  w.add_tensor("t", {32}, TensorType::F32, [](uint64_t, uint64_t, uint8_t*) { throw Error("source failed"); });
  EXPECT_THROW(w.write(path("f.gguf")), Error);
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(WriterTest, RejectsValuesThatDoNotFitTheirType) {
  auto fails = [&](Value v, const std::string& key) {
    Writer w;
    w.set(key, std::move(v));
    try {
      w.write(path("f.gguf"));
      ADD_FAILURE() << key << ": expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  fails(u64v(ValueType::UINT8, 256), "u8.too_big");
  fails(i64v(ValueType::INT8, -129), "i8.too_small");
  fails(i64v(ValueType::UINT32, -1), "u32.negative");
  fails(u64v(ValueType::INT64, uint64_t{1} << 63), "i64.too_big");
  fails(Value{ValueType::STRING, uint64_t{1}}, "string.holding_int");
  fails(Value{ValueType::FLOAT32, std::string("x")}, "f32.holding_string");
  fails(make_array(ValueType::UINT32, {make_u32(1), make_i32(2)}), "array.mixed");
  fails(Value{static_cast<ValueType>(13), uint64_t{0}}, "unknown.type");
  fails(make_string("not a number"), "general.alignment");
  fails(make_u32(48), "general.alignment");
  fails(make_u32(0), "general.alignment");
  fails(u64v(ValueType::UINT64, 32), "general.alignment");
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(WriterTest, RejectsBadTensors) {
  Writer w;
  EXPECT_THROW(w.add_tensor("t", {32, 2}, TensorType::F32, std::vector<uint8_t>(255)), Error);
  EXPECT_THROW(w.add_tensor("t", {33}, TensorType::Q8_0, std::vector<uint8_t>(34)), Error);
  EXPECT_THROW(w.add_tensor("t", {}, TensorType::F32, std::vector<uint8_t>()), Error);
  EXPECT_THROW(w.add_tensor("t", {1, 1, 1, 1, 1}, TensorType::F32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), {1}, TensorType::F32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor("t", {1}, static_cast<TensorType>(77), std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor("t", {uint64_t{1} << 40, uint64_t{1} << 40}, TensorType::F32, Writer::RowSource(
                                                                                               [](uint64_t, uint64_t, uint8_t*) {})),
               Error);
  w.add_tensor("t", {1}, TensorType::F32, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("t", {1}, TensorType::F32, std::vector<uint8_t>(4)), Error);
  // The rejected tensors left nothing behind.
  w.write(path("f.gguf"));
  EXPECT_EQ(File::open(path("f.gguf")).tensors().size(), 1u);
}

}  // namespace
}  // namespace llmserve::gguf
