#pragma once
// The exact tokens of recent chat answers. A chat's next turn repeats the
// previous prompt and answer as text; tokenizing that text again may split
// the answer differently from how the model generated it (e.g. "said" ".\n"
// generated, "said.\n" re-encoded), and the prefix cache then misses from
// there on. When the new prompt's text starts with a remembered prompt and
// answer at a token boundary, the answer's generated tokens take the place
// of the re-encoded ones: the same text, and the previous turn's KV is found
// in the prefix cache. Thread-safe; bounded (oldest forgotten first).
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llmserve::server {

class TurnTokens {
 public:
  explicit TurnTokens(const tok::Tokenizer& tok, size_t capacity = 256) : tok_(tok), capacity_(capacity) {}

  // A finished answer: the prompt's text and tokens, the generated tokens,
  // kept under the text those tokens spell (a client that sends back other
  // text finds nothing). The newest turn with a given answer wins.
  void remember(std::string prompt_text, std::vector<int32_t> prompt, const std::vector<int32_t>& answer);

  // `tokens`, the encoding of `text`, with the tokens of a remembered answer
  // that `text` repeats (after its prompt) put in place of their re-encoding,
  // where both meet at token boundaries. `answer` is the last assistant
  // message's content. Unchanged otherwise.
  std::vector<int32_t> splice(const std::string& text, const std::string& answer, std::vector<int32_t> tokens) const;

 private:
  struct Turn {
    std::string prompt_text;
    std::vector<int32_t> prompt, answer;
  };
  size_t text_bytes(int32_t token) const { return tok_.piece(token, true).size(); }

  const tok::Tokenizer& tok_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Turn> by_answer_;  // the answer's text -> its turn
  std::deque<std::string> order_;                    // oldest first
};

}  // namespace llmserve::server
