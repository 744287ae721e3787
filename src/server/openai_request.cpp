#include "server/openai_request.h"

#include <cmath>
#include <optional>

#include "core/error.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace llmserve::server {

namespace {

using fields::bad;
using fields::field;
using fields::integer;
using fields::token_ids;

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::optional<double> number(const Json& body, const char* name, double lo, double hi, bool lo_open = false) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, std::string("'") + name + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
    bad(name, std::string("'") + name + "' must be " + (lo_open ? "greater than " : "between ") + fmt(lo) +
                  (lo_open ? " and at most " : " and ") + fmt(hi) + ", got " + fmt(d));
  return d;
}

std::optional<bool> boolean(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, std::string("'") + name + "' must be a boolean");
  return v->get<bool>();
}

void parse_prompt(const Json& body, GenerationRequest& r, const RequestLimits& limits) {
  const Json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array()) bad("prompt", "'prompt' must be a string, an array of token ids, or an array of one of those");
  if (p->empty()) bad("prompt", "'prompt' must not be empty");
  const Json& first = (*p)[0];
  if (first.is_number()) {
    r.prompt_tokens = token_ids(*p, limits, "prompt");
    r.prompt_is_tokens = true;
    return;
  }
  if (p->size() > 1) bad("prompt", "only one prompt per request is supported; send one request per prompt");
  if (first.is_string()) {
    r.prompt_text = first.get<std::string>();
  } else if (first.is_array() && !first.empty()) {
    r.prompt_tokens = token_ids(first, limits, "prompt");
    r.prompt_is_tokens = true;
  } else {
    bad("prompt", "'prompt' must be a string, an array of token ids, or an array of one of those");
  }
}

// Content is a string, null, or an array of {"type": "text", "text": ...}
// parts, which are joined: chat templates expect a string.
std::string message_content(const Json& content, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of content parts");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object()) bad(param, "each content part must be an object");
    const Json* type = field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      bad(param, "only content parts of type 'text' are supported");
    const Json* t = field(part, "text");
    if (!t || !t->is_string()) bad(param, "a text content part needs a string 'text'");
    text += t->get<std::string>();
  }
  return text;
}

void parse_messages(const Json& body, GenerationRequest& r, const RequestLimits& limits) {
  const Json* m = field(body, "messages");
  if (!m) bad("messages", "'messages' is required");
  if (!m->is_array() || m->empty()) bad("messages", "'messages' must be a non-empty array");
  if (m->size() > limits.max_messages) bad("messages", "at most " + std::to_string(limits.max_messages) + " messages are allowed");
  r.messages = Json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const Json& msg = (*m)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) bad(param, "'" + param + "' must be an object");
    const Json* role = field(msg, "role");
    if (!role || !role->is_string()) bad(param + ".role", "'" + param + ".role' must be a string");
    const std::string& rs = role->get_ref<const std::string&>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool" && rs != "developer" && rs != "function")
      bad(param + ".role", "unknown role '" + rs + "'");
    const auto content = msg.find("content");
    if (content == msg.end() && rs != "assistant") bad(param + ".content", "'" + param + ".content' is required");
    Json out = msg;  // other fields (name, tool_calls, ...) reach the template unchanged
    out["content"] = content == msg.end() ? std::string() : message_content(*content, i);
    r.messages.push_back(std::move(out));
  }
  // Tool calling does not exist yet: refused, not answered as if honoured.
  if (const Json* t = field(body, "tools")) {
    if (!t->is_array()) bad("tools", "'tools' must be an array");
    if (!t->empty()) bad("tools", "tool calling is not supported: 'tools' must be empty or absent");
  }
  if (const Json* c = field(body, "tool_choice"); c && !(c->is_string() && c->get<std::string>() == "none"))
    bad("tool_choice", "tool calling is not supported: 'tool_choice' may only be \"none\"");
}

void parse_stop(const Json& body, GenerationRequest& r, const RequestLimits& limits) {
  const Json* s = field(body, "stop");
  if (!s) return;
  auto add = [&](const Json& v) {
    if (!v.is_string()) bad("stop", "'stop' must be a string or an array of strings");
    const std::string& str = v.get_ref<const std::string&>();
    if (str.empty()) bad("stop", "stop strings must not be empty");
    if (str.size() > limits.max_stop_bytes)
      bad("stop", "stop strings must be at most " + std::to_string(limits.max_stop_bytes) + " bytes");
    r.stop.push_back(str);
  };
  if (s->is_array()) {
    if (s->size() > static_cast<size_t>(limits.max_stop))
      bad("stop", "at most " + std::to_string(limits.max_stop) + " stop strings are allowed");
    for (const Json& v : *s) add(v);
  } else {
    add(*s);
  }
}

void refuse_unsupported(const Json& body, const GenerationRequest& r) {
  if (auto echo = boolean(body, "echo"); echo && *echo) bad("echo", "'echo' is not supported");
  if (const Json* s = field(body, "suffix"); s && !(s->is_string() && s->get_ref<const std::string&>().empty()))
    bad("suffix", "'suffix' is not supported");
  if (const Json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) bad("logit_bias", "'logit_bias' must be an object");
    if (!lb->empty()) bad("logit_bias", "'logit_bias' is not supported");
  }
  if (auto best_of = integer(body, "best_of", 1, 64); best_of && *best_of != r.n)
    bad("best_of", "'best_of' other than n is not supported");
  if (const Json* rf = field(body, "response_format")) {
    const Json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string()) bad("response_format", "'response_format' must be an object with a 'type'");
    if (type->get<std::string>() != "text") bad("response_format", "only response_format type 'text' is supported");
  }
}

}  // namespace

Json parse_json_body(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) throw ApiError(400, "JSON nested deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return Json::parse(body);
  } catch (const Json::exception& e) {
    throw ApiError(400, std::string("invalid JSON body: ") + e.what());
  }
}

std::string requested_model(const Json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const Json* m = field(body, "model");
  if (!m) return {};
  if (!m->is_string()) bad("model", "'model' must be a string");
  return m->get<std::string>();
}

GenerationRequest parse_generation_request(Endpoint endpoint, const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  GenerationRequest r;
  r.endpoint = endpoint;
  r.model = requested_model(body);
  if (endpoint == Endpoint::Completions) parse_prompt(body, r, limits);
  else parse_messages(body, r, limits);

  const char* max_name = endpoint == Endpoint::Chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (auto v = integer(body, max_name, 1, limits.max_tokens)) r.max_tokens = static_cast<int>(*v);

  engine::SamplingParams& s = r.sampling;
  s.temperature = 1.0f;  // OpenAI's defaults, not the CLI's
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  if (auto v = number(body, "temperature", 0, 2)) s.temperature = static_cast<float>(*v);
  if (auto v = number(body, "top_p", 0, 1, true)) s.top_p = static_cast<float>(*v);
  if (auto v = integer(body, "top_k", -1, 1 << 20)) s.top_k = static_cast<int>(std::max<int64_t>(0, *v));
  if (auto v = number(body, "min_p", 0, 1)) s.min_p = static_cast<float>(*v);
  if (auto v = number(body, "presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*v);
  if (auto v = number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*v);
  if (auto v = number(body, "repetition_penalty", 0, 10, true)) s.repetition_penalty = static_cast<float>(*v);
  if (auto v = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    s.seed = static_cast<uint64_t>(*v);
    r.seed_given = *v >= 0;  // negative, as llama.cpp's -1: a random seed
  }
  if (auto v = integer(body, "n", 1, limits.max_n)) r.n = static_cast<int>(*v);
  parse_stop(body, r, limits);

  if (auto v = boolean(body, "stream")) r.stream = *v;
  if (auto v = boolean(body, "speculative")) r.speculative = *v;
  if (auto v = boolean(body, "cache")) r.cache = *v;
  if (const Json* so = field(body, "stream_options")) {
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    if (auto v = boolean(*so, "include_usage")) r.include_usage = *v;
  }

  if (endpoint == Endpoint::Completions) {
    if (const Json* lp = field(body, "logprobs")) {
      if (lp->is_boolean()) bad("logprobs", "'logprobs' must be an integer for completions");
      r.top_logprobs = static_cast<int>(*integer(body, "logprobs", 0, 20));
    }
  } else {
    const bool want = boolean(body, "logprobs").value_or(false);
    const auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !want) bad("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    if (want) r.top_logprobs = static_cast<int>(top.value_or(0));
  }
  refuse_unsupported(body, r);
  try {
    engine::validate(s);
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  TokenizeRequest r;
  const Json* content = field(body, "content");
  const Json* prompt = field(body, "prompt");
  const bool chat = field(body, "messages") != nullptr;
  if ((content != nullptr) + (prompt != nullptr) + chat != 1)
    bad("content", "give one of 'content' (llama-server), 'prompt' or 'messages' (vLLM)");
  if (chat) {
    GenerationRequest g;
    parse_messages(body, g, limits);
    r.messages = std::move(g.messages);
    if (auto v = boolean(body, "add_generation_prompt")) r.add_generation_prompt = *v;
  } else {
    const char* name = content ? "content" : "prompt";
    const Json& text = content ? *content : *prompt;
    if (!text.is_string()) bad(name, std::string("'") + name + "' must be a string");
    r.text = text.get<std::string>();
    // llama-server adds no special tokens unless asked; vLLM adds them unless told not to.
    r.add_special = boolean(body, "add_special").value_or(boolean(body, "add_special_tokens").value_or(prompt != nullptr));
  }
  if (auto v = boolean(body, "with_pieces")) r.with_pieces = *v;
  return r;
}

std::vector<int32_t> parse_detokenize_request(const Json& body, const RequestLimits& limits, int n_vocab) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const Json* tokens = field(body, "tokens");
  if (!tokens || !tokens->is_array()) bad("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids = token_ids(*tokens, limits, "tokens");
  for (int32_t id : ids)
    if (id >= n_vocab)
      bad("tokens", "token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(n_vocab) + " tokens)");
  return ids;
}

}  // namespace llmserve::server
