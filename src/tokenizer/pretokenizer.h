#pragma once
// Splits text into the words that byte-level BPE merges within, using the
// regular expressions each model family was trained with (tokenizer.ggml.pre).
// Matching uses PCRE2 with Unicode properties and JIT; invalid UTF-8 never
// matches a pattern and so ends up in the gaps, which are kept as words too:
// every input byte lands in exactly one word.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::tok {

struct PretokenizerSpec {
  std::string name;                   // the canonical name it was chosen by
  std::vector<std::string> patterns;  // applied in turn, each to the words of the previous one
  bool ignore_merges = false;         // a word that is itself a token skips merging (Llama 3)
};

// The spec for a tokenizer.ggml.pre value. An absent or unknown value gets the
// GPT-2 pattern (with a warning for unknown ones): byte-level BPE stays exact
// and reversible under any split, only token counts drift from training.
PretokenizerSpec pretokenizer_spec(std::string_view pre, const std::string& source);

class Pretokenizer {
 public:
  // Throws Error naming `source` when a pattern does not compile.
  Pretokenizer(const PretokenizerSpec& spec, const std::string& source);
  Pretokenizer(Pretokenizer&&) noexcept;
  ~Pretokenizer();

  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace llmserve::tok
