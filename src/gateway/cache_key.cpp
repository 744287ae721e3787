#include "gateway/cache_key.h"

#include <bit>
#include <utility>

namespace llmserve::gateway {

namespace {

// Appends tagged fields; integers are written as 8 little-endian bytes,
// strings and lists with their length first, so the encoding is injective.
class Writer {
 public:
  void u64(char tag, uint64_t v) {
    out_ += tag;
    raw(v);
  }
  void i64(char tag, int64_t v) { u64(tag, static_cast<uint64_t>(v)); }
  // -0 and +0 are the same parameter; every other value keeps its bits.
  void f32(char tag, float v) { u64(tag, std::bit_cast<uint32_t>(v == 0.0f ? 0.0f : v)); }
  void str(char tag, const std::string& s) {
    u64(tag, s.size());
    out_ += s;
  }
  void tokens(char tag, const std::vector<int32_t>& ids) {
    u64(tag, ids.size());
    for (const int32_t id : ids) raw(static_cast<uint32_t>(id), 4);
  }
  std::string& out() { return out_; }

 private:
  void raw(uint64_t v, int bytes = 8) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

}  // namespace

EncodedKey encode(const CacheKey& key) {
  Writer w;
  w.str('T', key.tenant);
  w.str('M', key.model);
  w.str('E', key.endpoint);
  w.i64('x', key.max_tokens);
  w.f32('t', key.temperature);
  w.i64('k', key.top_k);
  w.f32('p', key.top_p);
  w.f32('m', key.min_p);
  w.f32('r', key.repetition_penalty);
  w.i64('w', key.repetition_window);
  w.f32('a', key.presence_penalty);
  w.f32('f', key.frequency_penalty);
  w.u64('S', key.seed.has_value());
  if (key.seed) w.u64('s', *key.seed);
  w.i64('n', key.n);
  w.i64('l', key.top_logprobs);
  w.u64('V', key.speculative);
  w.u64('O', key.stop.size());
  for (const std::string& s : key.stop) w.str('o', s);
  EncodedKey encoded;
  encoded.semantic_namespace = w.out();
  w.tokens('P', key.prompt_tokens);
  w.str('I', key.input);
  encoded.exact = std::move(w.out());
  return encoded;
}

}  // namespace llmserve::gateway
