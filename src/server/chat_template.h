#pragma once
// Chat prompts: the model's own tokenizer.chat_template (Jinja) rendered
// with messages, bos_token, eos_token and add_generation_prompt, as
// transformers does; ChatML when the model file has no template.
//
// Message content is text: only the template's own markup makes special
// tokens. Text from the request that spells a special token ("</s>",
// "<|im_end|>") is tokenized as text, as a completion prompt is.
#include <memory>
#include <string>
#include <vector>

#include "server/jinja.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::server {

// A rendered chat prompt and where in it the request's own text spells
// special tokens.
struct RenderedChat {
  std::string text;
  std::vector<tok::TextRange> content_specials;  // sorted, disjoint

  // The prompt's tokens: the markup's special tokens, everything else as
  // text; BOS first when the model wants one and the template did not write it.
  std::vector<tok::Token> encode(const tok::Tokenizer& tok) const;
};

class ChatTemplate {
 public:
  // An empty `source` selects the ChatML fallback. Throws jinja::TemplateError
  // when the template does not parse.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);

  // messages: [{role, content, ...}]; tools: array or null. Throws
  // jinja::TemplateError, e.g. when the template rejects the conversation
  // (roles that do not alternate).
  std::string render(const jinja::Value& messages, const jinja::Value& tools, bool add_generation_prompt) const;

  // render(), with the places where the request's strings (content, names,
  // ...) put special-token text into the prompt, as `specials` finds it.
  // Found by a second rendering in which that text is replaced by
  // placeholders; when the template then renders something else (it reads
  // the content), every such special text in the prompt counts, markup too.
  RenderedChat render_prompt(const jinja::Value& messages, const jinja::Value& tools, bool add_generation_prompt,
                             const tok::SpecialTokens& specials) const;

  bool is_fallback() const { return fallback_; }

  static const char* chatml_source();

 private:
  jinja::Template template_;
  std::string bos_, eos_;
  bool fallback_;
};

}  // namespace llmserve::server
