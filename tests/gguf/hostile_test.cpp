// gguf::File against truncated, corrupt and hostile input: every case must
// throw llmserve::Error naming the file, without crashing and without
// allocating far more than the input's size.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "alloc_guard.h"
#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"
#include "gguf/writer.h"
#include "gguf_bytes.h"
#include "test_models.h"

namespace llmserve::gguf {
namespace {

using testing::GgufBytes;

// Generous: the reader's own bookkeeping is a small multiple of the input.
constexpr size_t kMaxAllocationPerInputByte = 16;
constexpr size_t kAllocationAllowance = size_t{1} << 20;

void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& name = "hostile.gguf") {
  testing::reset_largest_allocation();
  try {
    File::parse(name, bytes.data(), bytes.size());
    ADD_FAILURE() << name << ": accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "message does not name the file: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw a non-llmserve exception: " << e.what();
  }
  EXPECT_LE(testing::largest_allocation(), kAllocationAllowance + kMaxAllocationPerInputByte * bytes.size())
      << name << " (" << bytes.size() << " bytes)";
}

// A valid file: one key, one f32 tensor of 8 elements.
GgufBytes valid_prefix(uint64_t n_tensors = 1, uint64_t n_kv = 1) {
  GgufBytes b;
  b.header(n_tensors, n_kv).kv_u32("general.alignment", 32);
  return b;
}

TEST(Hostile, EmptyAndTinyInputs) {
  expect_rejected({});
  expect_rejected({'G'});
  expect_rejected({'G', 'G', 'U', 'F'});
  expect_rejected({'G', 'G', 'U', 'F', 3, 0, 0});
}

TEST(Hostile, BadMagicAndVersions) {
  GgufBytes b;
  b.raw("GGML", 4).u32(3).u64(0).u64(0);
  expect_rejected(b.bytes);
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    GgufBytes v;
    v.header(0, 0, version);
    expect_rejected(v.bytes);
  }
}

TEST(Hostile, RandomBytes) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> bytes(rng() % 4096);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    expect_rejected(bytes, "random-" + std::to_string(i) + ".gguf");
  }
}

TEST(Hostile, RandomBytesAfterAValidHeaderNeverCrash) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    GgufBytes b;
    b.header(rng() % 4, rng() % 4);
    const size_t n = rng() % 512;
    for (size_t j = 0; j < n; ++j) b.u8(static_cast<uint8_t>(rng() % 16 == 0 ? rng() : rng() % 4));
    const std::string name = "random-header-" + std::to_string(i) + ".gguf";
    try {
      File::parse(name, b.bytes.data(), b.bytes.size());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST(Hostile, HugeCounts) {
  GgufBytes kv;
  kv.header(0, uint64_t{1} << 60);
  expect_rejected(kv.bytes);

  GgufBytes tensors;
  tensors.header(uint64_t{1} << 60, 0);
  expect_rejected(tensors.bytes);

  GgufBytes both;
  both.header(~uint64_t{0}, ~uint64_t{0}).zeros(64);
  expect_rejected(both.bytes);
}

TEST(Hostile, HugeStringLengths) {
  GgufBytes key;
  key.header(0, 1).u64(uint64_t{1} << 62).raw("abc", 3);
  expect_rejected(key.bytes);

  GgufBytes value;
  value.header(0, 1).str("k").u32(8).u64(uint64_t{1} << 62).raw("abc", 3);
  expect_rejected(value.bytes);

  GgufBytes name;
  name.header(1, 0).u64(~uint64_t{0}).zeros(64);
  expect_rejected(name.bytes);
}

TEST(Hostile, HugeArrayCounts) {
  for (uint32_t elem : {0u, 6u, 8u, 9u, 12u}) {  // u8, f32, string, array, f64
    GgufBytes b;
    b.header(0, 1).str("arr").u32(9).u32(elem).u64(uint64_t{1} << 62).zeros(64);
    expect_rejected(b.bytes, "array-of-" + std::to_string(elem) + ".gguf");
  }
}

TEST(Hostile, LongArrayInALargeFileDoesNotAllocateGigabytes) {
  // 24 MiB of u8 items, each of which costs a whole Value once parsed.
  const uint64_t n = uint64_t{24} << 20;
  GgufBytes b;
  b.header(0, 1).str("arr").u32(9).u32(0).u64(n);
  b.bytes.resize(b.bytes.size() + n, 1);
  testing::reset_largest_allocation();
  try {
    File::parse("long-array.gguf", b.bytes.data(), b.bytes.size());
  } catch (const Error&) {
    // Rejecting the array as too long is fine too.
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "an allocation above " << (testing::kAllocationHardLimit >> 20) << " MiB was attempted";
  }
  EXPECT_LE(testing::largest_allocation(), size_t{256} << 20);
}

TEST(Hostile, DeeplyNestedArrays) {
  GgufBytes b;
  b.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 1000; ++i) b.u32(9).u64(1);
  b.u32(0).u64(0);
  expect_rejected(b.bytes);
}

TEST(Hostile, BadValueTypes) {
  GgufBytes type;
  type.header(0, 1).str("k").u32(13).u32(0);
  expect_rejected(type.bytes, "value-type.gguf");

  GgufBytes elem;
  elem.header(0, 1).str("k").u32(9).u32(0xffffffff).u64(1).u32(0);
  expect_rejected(elem.bytes, "elem-type.gguf");

  GgufBytes boolean;
  boolean.header(0, 1).str("k").u32(7).u8(2);
  expect_rejected(boolean.bytes, "bool.gguf");
}

TEST(Hostile, DuplicateKeysAndTensorNames) {
  GgufBytes keys;
  keys.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_rejected(keys.bytes, "keys.gguf");

  GgufBytes names = valid_prefix(2);
  names.tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad_to(32).zeros(64);
  expect_rejected(names.bytes, "names.gguf");
}

TEST(Hostile, BadDimensions) {
  for (uint32_t n_dims : {0u, 5u, 1000u, 0xffffffffu}) {
    GgufBytes b = valid_prefix();
    b.str("t").u32(n_dims);
    for (int i = 0; i < 8; ++i) b.u64(1);
    b.pad_to(32).zeros(1024);
    expect_rejected(b.bytes, "n_dims-" + std::to_string(n_dims) + ".gguf");
  }
  const std::vector<std::vector<uint64_t>> dims = {
      {0}, {uint64_t{1} << 63}, {~uint64_t{0}}, {uint64_t{1} << 32, uint64_t{1} << 32, uint64_t{1} << 32},
      {uint64_t{1} << 21, uint64_t{1} << 21, uint64_t{1} << 21, uint64_t{1} << 21}};
  for (size_t i = 0; i < dims.size(); ++i) {
    GgufBytes b = valid_prefix();
    b.tensor("t", dims[i], 0, 0).pad_to(32).zeros(64);
    expect_rejected(b.bytes, "dims-" + std::to_string(i) + ".gguf");
  }
}

TEST(Hostile, BadTensorTypes) {
  GgufBytes unknown = valid_prefix();
  unknown.tensor("t", {32}, 99, 0).pad_to(32).zeros(256);
  expect_rejected(unknown.bytes, "type-99.gguf");

  GgufBytes partial_block = valid_prefix();
  partial_block.tensor("t", {33}, static_cast<uint32_t>(TensorType::Q4_0), 0).pad_to(32).zeros(256);
  expect_rejected(partial_block.bytes, "partial-block.gguf");
}

TEST(Hostile, TensorDataOutOfBounds) {
  GgufBytes past_end = valid_prefix();
  past_end.tensor("t", {8}, 0, 64).pad_to(32).zeros(64);  // data needs 64 + 32 bytes
  expect_rejected(past_end.bytes, "past-end.gguf");

  GgufBytes straddling = valid_prefix();
  straddling.tensor("t", {8}, 0, 0).pad_to(32).zeros(31);
  expect_rejected(straddling.bytes, "straddling.gguf");

  GgufBytes wrapping = valid_prefix();  // offset + size wraps around 2^64
  wrapping.tensor("t", {8}, 0, ~uint64_t{31}).pad_to(32).zeros(64);
  expect_rejected(wrapping.bytes, "wrapping.gguf");

  GgufBytes no_data = valid_prefix();  // the data section itself is missing
  no_data.tensor("t", {8}, 0, 0);
  expect_rejected(no_data.bytes, "no-data.gguf");
}

TEST(Hostile, MisalignedTensorOffset) {
  GgufBytes b = valid_prefix();
  b.tensor("t", {8}, 0, 4).pad_to(32).zeros(64);
  expect_rejected(b.bytes, "misaligned.gguf");
}

TEST(Hostile, BadAlignmentValues) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000000u}) {
    GgufBytes b;
    b.header(1, 1).kv_u32("general.alignment", a).tensor("t", {8}, 0, 0).zeros(128);
    expect_rejected(b.bytes, "alignment-" + std::to_string(a) + ".gguf");
  }
  GgufBytes text;
  text.header(0, 1).str("general.alignment").u32(8).str("32");
  expect_rejected(text.bytes, "alignment-string.gguf");
}

TEST(Hostile, NegativeAlignmentErrorNamesTheFile) {
  GgufBytes b;
  b.header(0, 1).str("general.alignment").u32(5).i32(-32);
  expect_rejected(b.bytes, "alignment-negative.gguf");
}

// A writer-made file with metadata of several types and three tensors.
std::vector<uint8_t> small_valid_file(const std::string& path) {
  Writer w;
  w.set("general.architecture", make_string("llama"));
  w.set("list", make_array(ValueType::STRING, {make_string("a"), make_string("bc")}));
  w.set("nested", make_array(ValueType::ARRAY, {make_array(ValueType::INT32, {make_i32(-1)})}));
  w.set("eps", make_f32(1e-5f));
  w.add_tensor("a", {32, 2}, TensorType::Q8_0, std::vector<uint8_t>(2 * 34, 0));
  w.add_tensor("b", {5}, TensorType::F32, std::vector<uint8_t>(20, 0));
  w.add_tensor("c", {64}, TensorType::F16, std::vector<uint8_t>(128, 0));
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// End of the last tensor's data: every shorter prefix is missing something.
uint64_t data_end(const File& f) {
  uint64_t end = f.data_offset();
  for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
  return end;
}

TEST(Hostile, EveryTruncationOfASmallFile) {
  const llmserve::testing::TempFile file("hostile-small.gguf");
  const auto bytes = small_valid_file(file.path());
  const File whole = File::parse("whole.gguf", bytes.data(), bytes.size());
  const uint64_t end = data_end(whole);
  for (uint64_t n = 0; n < end; ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    expect_rejected(prefix, "small@" + std::to_string(n) + ".gguf");
  }
}

void check_truncations(const std::string& model) {
  std::ifstream in(model, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const File whole = File::parse(model, bytes.data(), bytes.size());
  const uint64_t end = data_end(whole);
  // Every byte of the fixed header, then points spread over the metadata
  // and the data, plus the boundaries where a parse step changes.
  std::vector<uint64_t> cuts;
  for (uint64_t n = 0; n < 64; ++n) cuts.push_back(n);
  for (uint64_t k = 1; k < 200; ++k) cuts.push_back(end * k / 200);
  for (const auto& t : whole.tensors()) {
    const uint64_t start = whole.data_offset() + t.offset;
    for (uint64_t n : {start, start + 1, start + t.n_bytes - 1}) cuts.push_back(n);
  }
  for (uint64_t n : {whole.data_offset() - 1, whole.data_offset(), end - 1}) cuts.push_back(n);
  for (uint64_t n : cuts) {
    ASSERT_LT(n, end);
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    expect_rejected(prefix, model + "@" + std::to_string(n));
  }
}

TEST(HostileModels, TruncatedStories260K) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  check_truncations(path);
}
TEST(HostileModels, TruncatedTinyStoriesF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  check_truncations(path);
}
TEST(HostileModels, TruncatedTinyStoriesQ8_0) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  check_truncations(path);
}
TEST(HostileModels, TruncatedLlama2TinyRandom) {
  REQUIRE_MODEL(path, "llama-2-tiny-random.gguf");
  check_truncations(path);
}

}  // namespace
}  // namespace llmserve::gguf
