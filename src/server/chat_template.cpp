#include "server/chat_template.h"

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace llmserve::server {
namespace {

using jinja::Value;
using tok::TextRange;

// A placeholder is the private-use code point U+100000 + k, k the index of a
// special text: to a template it is an ordinary character (not space, not a
// letter), and its 4 UTF-8 bytes are F4 8x xx xx.
constexpr size_t kMaxPlaceholders = 0xFFFE;

void append_placeholder(std::string& out, size_t k) {
  out += static_cast<char>(0xF4);
  out += static_cast<char>(0x80 | (k >> 12));
  out += static_cast<char>(0x80 | ((k >> 6) & 0x3F));
  out += static_cast<char>(0x80 | (k & 0x3F));
}

std::optional<size_t> placeholder_at(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return std::nullopt;
  const auto byte = [&](size_t j) { return static_cast<uint8_t>(s[i + j]); };
  if (byte(0) != 0xF4 || (byte(1) & 0xF0) != 0x80 || (byte(2) & 0xC0) != 0x80 || (byte(3) & 0xC0) != 0x80)
    return std::nullopt;
  return (size_t{byte(1) & 0x0Fu} << 12) | (size_t{byte(2) & 0x3Fu} << 6) | (byte(3) & 0x3Fu);
}

// The special-token texts in the request's strings, each replaced by its
// placeholder (object keys included: all of it is the client's text).
class RequestSpecials {
 public:
  explicit RequestSpecials(const tok::SpecialTokens& specials) : specials_(specials) {}

  Value replace(const Value& v) {
    if (v.is_string()) return replace_text(v.get_ref<const std::string&>());
    if (v.is_array()) {
      Value out = Value::array();
      for (const Value& item : v) out.push_back(replace(item));
      return out;
    }
    if (v.is_object()) {
      Value out = Value::object();
      for (const auto& [key, item] : v.items()) out[replace_text(key)] = replace(item);
      return out;
    }
    return v;
  }

  const std::vector<std::string>& texts() const { return texts_; }
  bool contains(std::string_view text) const { return index_.contains(std::string(text)); }
  bool placeholders_fit() const { return texts_.size() <= kMaxPlaceholders; }

  // `rendered` with each placeholder turned back into its text, and where
  // those texts are in the result.
  RenderedChat restore(std::string_view rendered) const {
    RenderedChat out;
    for (size_t i = 0; i < rendered.size();) {
      const std::optional<size_t> k = placeholder_at(rendered, i);
      if (!k || *k >= texts_.size()) {
        out.text += rendered[i++];
        continue;
      }
      out.content_specials.push_back({out.text.size(), out.text.size() + texts_[*k].size()});
      out.text += texts_[*k];
      i += 4;
    }
    return out;
  }

 private:
  std::string replace_text(const std::string& s) {
    std::string out;
    for (const tok::SpecialTokens::Fragment& f : specials_.split(s)) {
      if (f.id < 0) {
        out += f.text;
        continue;
      }
      const auto [it, added] = index_.try_emplace(std::string(f.text), texts_.size());
      if (added) texts_.emplace_back(f.text);
      if (it->second < kMaxPlaceholders) append_placeholder(out, it->second);  // else unused: !placeholders_fit()
    }
    return out;
  }

  const tok::SpecialTokens& specials_;
  std::vector<std::string> texts_;  // placeholder k -> its special text
  std::unordered_map<std::string, size_t> index_;
};

// Every special token in `text` whose text the request holds.
std::vector<TextRange> request_specials_in(std::string_view text, const RequestSpecials& request,
                                           const tok::SpecialTokens& specials) {
  std::vector<TextRange> out;
  for (const tok::SpecialTokens::Fragment& f : specials.split(text)) {
    if (f.id < 0 || !request.contains(f.text)) continue;
    const auto at = static_cast<size_t>(f.text.data() - text.data());
    out.push_back({at, at + f.text.size()});
  }
  return out;
}

}  // namespace

std::vector<tok::Token> RenderedChat::encode(const tok::Tokenizer& tok) const {
  std::vector<tok::Token> out = tok.encode(text, false, true, content_specials);
  if (tok.add_bos_by_default() && tok.bos() >= 0 && (out.empty() || out.front() != tok.bos()))
    out.insert(out.begin(), tok.bos());
  return out;
}

const char* ChatTemplate::chatml_source() {
  return "{% for message in messages %}"
         "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
         "{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : template_(source.empty() ? std::string(chatml_source()) : source),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      fallback_(source.empty()) {}

std::string ChatTemplate::render(const Value& messages, const Value& tools, bool add_generation_prompt) const {
  Value ctx = Value::object();
  ctx["messages"] = messages;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (tools.is_array()) ctx["tools"] = tools;
  return template_.render(ctx);
}

RenderedChat ChatTemplate::render_prompt(const Value& messages, const Value& tools, bool add_generation_prompt,
                                         const tok::SpecialTokens& specials) const {
  RenderedChat chat{render(messages, tools, add_generation_prompt), {}};
  RequestSpecials request(specials);
  const Value marked_messages = request.replace(messages);
  const Value marked_tools = request.replace(tools);
  if (request.texts().empty()) return chat;
  if (request.placeholders_fit()) {
    try {
      RenderedChat marked = request.restore(render(marked_messages, marked_tools, add_generation_prompt));
      if (marked.text == chat.text) return marked;
    } catch (const jinja::TemplateError&) {
      // The template treats the replaced text otherwise: as below.
    }
  }
  chat.content_specials = request_specials_in(chat.text, request, specials);
  return chat;
}

}  // namespace llmserve::server
