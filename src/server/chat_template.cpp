#include "server/chat_template.h"

namespace llmserve::server {

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

std::string ChatTemplate::render(const jinja::Value& messages, const jinja::Value& tools, bool add_generation_prompt) const {
  jinja::Value ctx = jinja::Value::object();
  ctx["messages"] = messages;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (tools.is_array()) ctx["tools"] = tools;
  return template_.render(ctx);
}

}  // namespace llmserve::server
