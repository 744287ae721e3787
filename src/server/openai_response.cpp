#include "server/openai_response.h"

#include <cstdio>

#include "server/api_error.h"

namespace llmserve::server {

namespace {

Json byte_array(const std::string& s) {
  Json a = Json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

bool is_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();  // the default handler throws on invalid UTF-8
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

Json chat_logprobs(const std::vector<LogprobEntry>& entries) {
  Json content = Json::array();
  for (const LogprobEntry& e : entries) {
    Json top = Json::array();
    for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}, {"bytes", byte_array(t)}});
    content.push_back({{"token", e.token}, {"logprob", e.logprob}, {"bytes", byte_array(e.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

Json completion_logprobs(const std::vector<LogprobEntry>& entries) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob);
    Json top = Json::object();
    for (const auto& [t, lp] : e.top) top[t] = lp;
    tops.push_back(top);
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json logprobs_of(Endpoint ep, const ChoicePiece& p) {
  if (!p.logprobs_requested) return nullptr;
  return ep == Endpoint::Chat ? chat_logprobs(p.logprobs) : completion_logprobs(p.logprobs);
}

Json finish_of(const ChoicePiece& p) { return p.finish_reason.empty() ? Json(nullptr) : Json(p.finish_reason); }

Json envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

}  // namespace

const char* error_type_for(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 408:
    case 504: return "timeout_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

ApiError timeout_error(std::chrono::milliseconds timeout) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout.count() / 1e3);
  return ApiError(504, std::string("the request timed out after ") + seconds + " s", error_type_for(504), {}, "timeout");
}

ApiError drain_timeout_error() {
  return ApiError(503, "the server stopped before this request finished (drain timeout)", error_type_for(503), {}, "drain_timeout");
}

std::string error_body(const ApiError& e) {
  Json err = {{"message", e.what()},
              {"type", e.type.empty() ? error_type_for(e.status) : e.type},
              {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
              {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}};
  return dump(Json{{"error", err}});
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json usage_json(const Usage& u) {
  Json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens > 0) j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return j;
}

Json stream_chunk(const ResponseMeta& meta, const ChoicePiece& p, bool include_usage) {
  Json choice;
  Json j;
  if (meta.endpoint == Endpoint::Chat) {
    j = envelope(meta, "chat.completion.chunk");
    Json delta = Json::object();
    if (p.first) delta["role"] = "assistant";
    if (!p.text.empty() || p.first) delta["content"] = p.text;
    choice = {{"index", p.index}, {"delta", delta}, {"logprobs", logprobs_of(meta.endpoint, p)}, {"finish_reason", finish_of(p)}};
  } else {
    j = envelope(meta, "text_completion");
    choice = {{"index", p.index}, {"text", p.text}, {"logprobs", logprobs_of(meta.endpoint, p)}, {"finish_reason", finish_of(p)}};
  }
  j["choices"] = Json::array({choice});
  if (include_usage) j["usage"] = nullptr;  // OpenAI: null on every chunk but the last
  return j;
}

Json usage_chunk(const ResponseMeta& meta, const Usage& u) {
  Json j = envelope(meta, meta.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usage_json(u);
  return j;
}

Json full_response(const ResponseMeta& meta, const std::vector<ChoicePiece>& choices, const Usage& u) {
  Json j = envelope(meta, meta.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion");
  Json arr = Json::array();
  for (const ChoicePiece& p : choices) {
    if (meta.endpoint == Endpoint::Chat)
      arr.push_back({{"index", p.index},
                     {"message", {{"role", "assistant"}, {"content", p.text}}},
                     {"logprobs", logprobs_of(meta.endpoint, p)},
                     {"finish_reason", finish_of(p)}});
    else
      arr.push_back({{"index", p.index}, {"text", p.text}, {"logprobs", logprobs_of(meta.endpoint, p)}, {"finish_reason", finish_of(p)}});
  }
  j["choices"] = arr;
  j["usage"] = usage_json(u);
  return j;
}

Json model_object(const std::string& model, int64_t created, int max_model_len) {
  return {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "llmserve"}, {"max_model_len", max_model_len}};
}

Json model_list(Json model_objects) { return {{"object", "list"}, {"data", std::move(model_objects)}}; }

Json tokenize_response(const std::vector<int32_t>& ids, const std::vector<std::string>* pieces, int max_model_len) {
  Json tokens = Json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!pieces) {
      tokens.push_back(ids[i]);
      continue;
    }
    // As llama-server: a piece that is not UTF-8 on its own goes as its bytes.
    const std::string& p = (*pieces)[i];
    tokens.push_back({{"id", ids[i]}, {"piece", is_utf8(p) ? Json(p) : byte_array(p)}});
  }
  return {{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", max_model_len}};
}

Json detokenize_response(const std::string& text) { return {{"content", text}, {"prompt", text}}; }

}  // namespace llmserve::server
