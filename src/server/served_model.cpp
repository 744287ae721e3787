#include "server/served_model.h"

#include "gguf/file.h"
#include "server/api_error.h"

namespace llmserve::server {

namespace {

std::string token_text(const tok::Tokenizer& tok, tok::Token id) { return id >= 0 ? tok.text(id) : std::string(); }

}  // namespace

ServedModel::ServedModel(std::string name, int index, const model::LoadedModel& model)
    : name(std::move(name)),
      index(index),
      tokenizer(model.tokenizer()),
      chat_template(model.model().file().get_string("tokenizer.chat_template", ""), token_text(tokenizer, tokenizer.bos()),
                    token_text(tokenizer, tokenizer.eos())),
      turns(tokenizer) {}

RenderedChat render_chat(const ServedModel& m, const Json& messages, bool add_generation_prompt) {
  try {
    return m.chat_template.render_prompt(messages, nullptr, add_generation_prompt, m.tokenizer.special_tokens());
  } catch (const jinja::TemplateError& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
}

}  // namespace llmserve::server
