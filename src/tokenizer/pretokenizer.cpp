#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <spdlog/spdlog.h>

#include <array>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace llmserve::tok {
namespace {

// Patterns as published in each family's tokenizer.json (Hugging Face
// tokenizers' Split / ByteLevel pre-tokenizers).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSingleDigits = R"(\p{N})";

struct Family {
  std::array<std::string_view, 7> names;  // tokenizer.ggml.pre values that use it
  std::vector<std::string> patterns;
  bool ignore_merges;
};

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {{"gpt2", "gpt-2", "default", "mpt", "olmo", "phi-2", "roberta-bpe"}, {kGpt2}, false},
      {{"llama-bpe", "llama3", "llama-v3"}, {kLlama3}, true},
      {{"qwen2", "stablelm2", "deepseek-r1-qwen"}, {kQwen2}, false},
      // SmolLM (StarCoder-style): every digit is a word of its own, then GPT-2.
      {{"smollm", "starcoder", "refact", "command-r", "codeshell"}, {kSingleDigits, kGpt2}, false},
  };
  return all;
}

}  // namespace

PretokenizerSpec pretokenizer_spec(std::string_view pre, const std::string& source) {
  const std::string_view wanted = pre.empty() ? "default" : pre;
  for (const Family& f : families()) {
    for (std::string_view name : f.names) {
      if (!name.empty() && name == wanted) return {std::string(f.names[0]), f.patterns, f.ignore_merges};
    }
  }
  spdlog::warn("{}: tokenizer.ggml.pre '{}' is not known; using the GPT-2 pre-tokenizer "
               "(encoding stays lossless but may differ from the model's training)",
               source, pre);
  return pretokenizer_spec("gpt2", source);
}

struct Pretokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(const PretokenizerSpec& spec, const std::string& source) {
  for (const std::string& pattern : spec.patterns) {
    int err = 0;
    PCRE2_SIZE err_at = 0;
    auto regex = std::make_unique<Regex>();
    // UCP: \s, \d and friends follow Unicode like the reference tokenizers.
    // MATCH_INVALID_UTF: arbitrary bytes are legal input and simply never match.
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_at,
                                nullptr);
    if (regex->code == nullptr) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw Error(source + ": pre-tokenizer '" + spec.name + "': pattern does not compile at offset " +
                  std::to_string(err_at) + ": " + reinterpret_cast<const char*>(msg.data()));
    }
    // Without JIT support in the library the interpreter still gives the same results.
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(regex));
  }
}

Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer::~Pretokenizer() = default;

namespace {

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) throw Error("pre-tokenizer: out of memory");
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

// One match starting the search at `from`; false when there is none.
bool find(const pcre2_code* code, std::string_view word, size_t from, MatchData& m, size_t& begin,
          size_t& end) {
  const auto subject = reinterpret_cast<PCRE2_SPTR>(word.data());
  int rc = pcre2_match(code, subject, word.size(), from, 0, m.md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // Pathological input (e.g. a huge run of one class): the interpreter uses the heap.
    rc = pcre2_match(code, subject, word.size(), from, PCRE2_NO_JIT, m.md, nullptr);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    std::array<PCRE2_UCHAR, 256> msg{};
    pcre2_get_error_message(rc, msg.data(), msg.size());
    throw Error(std::string("pre-tokenizer: matching failed: ") + reinterpret_cast<const char*>(msg.data()));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (!text.empty()) words.push_back(text);
  for (const auto& regex : regexes_) {
    MatchData m(regex->code);
    std::vector<std::string_view> next;
    next.reserve(words.size() * 2);
    for (std::string_view word : words) {
      size_t done = 0, from = 0, begin = 0, end = 0;
      while (from < word.size() && find(regex->code, word, from, m, begin, end)) {
        if (end == begin) {  // an empty match splits nothing: look past this character
          if (begin >= word.size()) break;
          from = begin + utf8::scan(word, begin).len;
          continue;
        }
        if (begin > done) next.push_back(word.substr(done, begin - done));
        next.push_back(word.substr(begin, end - begin));
        done = from = end;
      }
      if (done < word.size()) next.push_back(word.substr(done));
    }
    words = std::move(next);
  }
  return words;
}

}  // namespace llmserve::tok
