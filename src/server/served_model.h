#pragma once
// One model as the API serves it: its id, its place in the engine, and
// what its requests use of their own: tokenizer, chat template, the tokens
// of its recent chat answers, metrics and a bounded queue.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "model/instance.h"
#include "server/chat_template.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/turn_tokens.h"

namespace llmserve::server {

struct ServedModel {
  // Reads the chat template from the model file (throws jinja::TemplateError
  // when it does not parse).
  ServedModel(std::string name, int index, const model::LoadedModel& model);

  const std::string name;  // the id in /v1/models and in a request's "model"
  const int index;         // the engine's (RequestParams::model)
  const tok::Tokenizer& tokenizer;
  const ChatTemplate chat_template;
  TurnTokens turns;
  ModelMetrics metrics;
  std::atomic<int> in_flight{0};  // engine requests admitted and not finished
};

// The model named `name` among `models`, or nullptr.
ServedModel* find_model(const std::vector<std::unique_ptr<ServedModel>>& models, const std::string& name);

// The model's chat prompt for `messages`; throws ApiError(400) when its template fails on them.
RenderedChat render_chat(const ServedModel& m, const Json& messages, bool add_generation_prompt);

// A completion's prompt as one model reads it.
struct TemplatedPrompt {
  std::vector<int32_t> tokens;
  std::string text;               // chat: the rendered template
  std::vector<std::string> stop;  // the request's, plus the template's implicit ones
};
// Throws ApiError(400) for token ids outside the vocabulary or a template that fails.
TemplatedPrompt template_prompt(const ServedModel& m, const GenerationRequest& r);

}  // namespace llmserve::server
