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

ServedModel* find_model(const std::vector<std::unique_ptr<ServedModel>>& models, const std::string& name) {
  for (const auto& m : models)
    if (m->name == name) return m.get();
  return nullptr;
}

RenderedChat render_chat(const ServedModel& m, const Json& messages, bool add_generation_prompt) {
  try {
    return m.chat_template.render_prompt(messages, nullptr, add_generation_prompt, m.tokenizer.special_tokens());
  } catch (const jinja::TemplateError& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
}

TemplatedPrompt template_prompt(const ServedModel& m, const GenerationRequest& r) {
  const tok::Tokenizer& tok = m.tokenizer;
  TemplatedPrompt p;
  p.stop = r.stop;
  if (r.endpoint == Endpoint::Completions) {
    if (!r.prompt_is_tokens) {
      p.tokens = tok.encode(r.prompt_text, tok.add_bos_by_default(), false);
      return p;
    }
    for (int32_t t : r.prompt_tokens)
      if (t >= tok.n_vocab())
        throw ApiError(400, "token id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(tok.n_vocab()) + ")",
                       "invalid_request_error", "prompt");
    p.tokens = r.prompt_tokens;
    return p;
  }
  RenderedChat chat = render_chat(m, r.messages, true);
  p.tokens = chat.encode(tok);  // special text in message content stays text
  for (auto msg = r.messages.rbegin(); msg != r.messages.rend(); ++msg)
    if (msg->at("role") == "assistant") {  // parse_generation_request made role and content strings
      p.tokens = m.turns.splice(chat.text, msg->at("content").get<std::string>(), std::move(p.tokens));
      break;
    }
  p.text = std::move(chat.text);
  if (m.chat_template.is_fallback()) p.stop.push_back("<|im_end|>");  // may be plain text in this vocabulary
  return p;
}

}  // namespace llmserve::server
