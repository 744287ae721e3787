#include "server/served_model.h"

#include "gguf/file.h"

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

}  // namespace llmserve::server
