#pragma once
// Chat prompts: the model's own tokenizer.chat_template (Jinja) rendered
// with messages, bos_token, eos_token and add_generation_prompt, as
// transformers does; ChatML when the model file has no template.
#include <memory>
#include <string>

#include "server/jinja.h"

namespace llmserve::server {

class ChatTemplate {
 public:
  // An empty `source` selects the ChatML fallback. Throws jinja::TemplateError
  // when the template does not parse.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);

  // messages: [{role, content, ...}]; tools: array or null. Throws
  // jinja::TemplateError, e.g. when the template rejects the conversation
  // (roles that do not alternate).
  std::string render(const jinja::Value& messages, const jinja::Value& tools, bool add_generation_prompt) const;

  bool is_fallback() const { return fallback_; }

  static const char* chatml_source();

 private:
  jinja::Template template_;
  std::string bos_, eos_;
  bool fallback_;
};

}  // namespace llmserve::server
