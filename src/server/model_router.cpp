#include "server/model_router.h"

#include "engine/next_token_stats.h"

namespace llmserve::server {

namespace {

std::vector<std::string> names(const std::vector<std::unique_ptr<ServedModel>>& models) {
  std::vector<std::string> out;
  for (const auto& m : models) out.push_back(m->name);
  return out;
}

}  // namespace

ModelRouter::ModelRouter(gateway::RouterConfig config, engine::Engine& engine, const std::vector<std::unique_ptr<ServedModel>>& models)
    : router_(std::move(config), names(models)),
      engine_(engine),
      small_(find_model(models, router_.config().small)),
      large_(find_model(models, router_.config().large)) {}

void ModelRouter::choose(const GenerationRequest& r, std::vector<int32_t> prompt, ServerMetrics& metrics,
                         const std::shared_ptr<Exchange>& ex, std::function<void(ServedModel&)> then) {
  gateway::RouteRequest request;
  request.max_tokens = std::max(0, r.max_tokens);
  std::string text;
  if (r.endpoint == Endpoint::Completions) {
    text = r.prompt_text;
  } else {
    for (const auto& m : r.messages)
      if (const auto content = m.find("content"); content != m.end() && content->is_string()) {
        if (!text.empty()) text += '\n';
        text += content->get_ref<const std::string&>();
      }
    request.turns = static_cast<int>(r.messages.size());
  }
  request.prompt_tokens = static_cast<int>(prompt.size());
  if (prompt.empty() || request.prompt_tokens >= engine_.info(small_->index).max_context) {
    metrics.count_route(large_->name);
    return then(*large_);
  }
  // The engine thread only posts the stats back to the exchange's strand.
  engine::request_next_token_stats(
      engine_, small_->index, std::move(prompt),
      [this, &metrics, weak = std::weak_ptr<Exchange>(ex), request, text = std::move(text),
       then = std::move(then)](std::optional<engine::NextTokenStats> stats) mutable {
        const auto exchange = weak.lock();
        if (!exchange) return;
        exchange->post([this, &metrics, weak, stats, request, text = std::move(text), then = std::move(then)]() mutable {
          if (const auto ex = weak.lock(); !ex || ex->answered()) return;  // answered meanwhile (timeout, drain)
          request.text = text;  // the view into the caller's string is gone by now
          ServedModel* chosen = large_;
          if (stats) {
            request.entropy = stats->entropy;
            request.margin = stats->margin;
            chosen = router_.choose(gateway::route_score(gateway::route_features(request))) == small_->name ? small_ : large_;
          }
          metrics.count_route(chosen->name);
          then(*chosen);
        });
      });
}

}  // namespace llmserve::server
