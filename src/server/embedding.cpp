#include "server/embedding.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_response.h"

namespace llmserve::server {

std::vector<std::vector<int32_t>> tokenize_inputs(const EmbeddingRequest& r, const tok::Tokenizer& tok, int max_tokens) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    const std::string name = r.inputs.size() == 1 ? "input" : "input[" + std::to_string(i) + "]";
    std::vector<int32_t> ids = in.is_tokens ? in.tokens : tok.encode(in.text, tok.add_bos_by_default(), false);
    for (int32_t t : ids)
      if (t >= tok.n_vocab())
        throw ApiError(400, "token id " + std::to_string(t) + " in '" + name + "' is outside the vocabulary (" +
                                std::to_string(tok.n_vocab()) + ")",
                       "invalid_request_error", "input");
    if (static_cast<int>(ids.size()) > max_tokens)
      throw ApiError(400, "'" + name + "' has " + std::to_string(ids.size()) + " tokens; at most " +
                              std::to_string(max_tokens) + " are allowed",
                     "invalid_request_error", "input", "context_length_exceeded");
    out.push_back(std::move(ids));
  }
  return out;
}

Embedding::Embedding(EmbeddingContext ctx, EmbeddingPlan plan, std::shared_ptr<Exchange> exchange)
    : ctx_(ctx), plan_(std::move(plan)), exchange_(std::move(exchange)), vectors_(plan_.inputs.size()) {
  for (const auto& in : plan_.inputs) prompt_tokens_ += static_cast<int>(in.size());
}

void Embedding::start() {
  started_ = std::chrono::steady_clock::now();
  exchange_->on_close([self = shared_from_this()] {
    if (self->done_) return;
    self->done_ = true;
    self->cancel_unfinished();
    self->ctx_.metrics.count_http_status(499);
    self->log_line(499, "client disconnected");
  });
  exchange_->on_server_stop([self = shared_from_this()] { self->fail(drain_timeout_error()); });
  if (plan_.timeout.count() > 0)
    exchange_->after(plan_.timeout, [w = weak_from_this()] {
      if (auto s = w.lock()) {
        s->ctx_.metrics.count_rejection("timeout");
        s->fail(timeout_error(s->plan_.timeout));
      }
    });
  if (done_) {  // the client left before the start: compute nothing
    ctx_.model.in_flight.fetch_sub(static_cast<int>(plan_.inputs.size()));
    return;
  }
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    engine::RequestParams p;
    p.prompt = plan_.inputs[i];
    p.model = ctx_.model.index;
    p.embed = true;
    // Engine thread: the count of requests in flight drops at once, the rest waits for the strand.
    auto callback = [w = weak_from_this(), ex = std::weak_ptr<Exchange>(exchange_), &in_flight = ctx_.model.in_flight,
                     i](const engine::RequestOutput& out) {
      if (out.finished) in_flight.fetch_sub(1);
      if (auto e = ex.lock()) e->post([w, i, out] {
          if (auto s = w.lock()) s->take(i, out);
        });
    };
    try {
      ids_.push_back(ctx_.engine.submit(std::move(p), std::move(callback)));
    } catch (const Error& e) {
      ctx_.model.in_flight.fetch_sub(static_cast<int>(plan_.inputs.size() - i));  // never submitted
      return fail(503, e.what(), "engine_unavailable");
    }
  }
}

void Embedding::take(size_t index, const engine::RequestOutput& out) {
  if (done_) return;
  if (out.finish_reason != engine::FinishReason::Stop)
    return fail(out.finish_reason == engine::FinishReason::Error ? 500 : 503,
                out.error.empty() ? "the embedding was not computed" : out.error, "embedding_failed");
  vectors_[index] = out.embedding;
  if (++finished_ < vectors_.size()) return;
  done_ = true;
  exchange_->respond({200, "application/json", dump(embedding_response(vectors_, plan_.encoding, plan_.model, prompt_tokens_)),
                      plan_.headers});
  ctx_.metrics.count_http_status(200);
  log_line(200, "ok");
}

void Embedding::cancel_unfinished() {
  for (size_t i = 0; i < ids_.size(); ++i)
    if (vectors_[i].empty()) ctx_.engine.cancel(ids_[i]);
}

void Embedding::fail(int status, const std::string& message, const char* code) {
  if (done_) return;
  done_ = true;
  cancel_unfinished();
  exchange_->respond({status, "application/json", error_body(ApiError(status, message, error_type_for(status), {}, code)),
                      plan_.headers});
  ctx_.metrics.count_http_status(status);
  log_line(status, std::string(code) + ": " + message);
}

void Embedding::log_line(int status, std::string_view outcome) const {
  spdlog::info("embeddings {} status={} inputs={} prompt_tokens={} e2e_ms={:.1f} request_id={} ({})", plan_.remote, status,
               plan_.inputs.size(), prompt_tokens_,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count(),
               plan_.request_id, outcome);
}

}  // namespace llmserve::server
