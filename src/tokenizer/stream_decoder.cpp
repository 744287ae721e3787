#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace llmserve::tok {

std::string StreamDecoder::push(Token id) {
  pending_ += tok_.output_piece(id, at_start_);
  at_start_ = id == tok_.bos();
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Sequence seq = utf8::scan(pending_, pos);
    if (seq.kind == utf8::Kind::INCOMPLETE) break;  // only at the end: wait for the next token
    if (seq.kind == utf8::Kind::VALID) {
      out.append(pending_, pos, seq.len);
    } else {
      out += utf8::kReplacement;  // no later byte can repair it
    }
    pos += seq.len;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = pending_.empty() ? std::string() : std::string(utf8::kReplacement);
  pending_.clear();
  return out;
}

}  // namespace llmserve::tok
