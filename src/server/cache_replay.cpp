#include "server/cache_replay.h"

#include "server/sse.h"

namespace llmserve::server {

void replay(const gateway::CachedAnswer& answer, const GenerationPlan& plan, size_t prompt_tokens, Exchange& ex) {
  const Usage usage{static_cast<int>(prompt_tokens), answer.completion_tokens, 0};
  std::vector<ChoicePiece> pieces;
  for (size_t i = 0; i < answer.choices.size(); ++i) {
    const gateway::CachedChoice& c = answer.choices[i];
    pieces.push_back({static_cast<int>(i), c.text, false, {}, c.finish_reason, true});
  }
  if (!plan.request.stream) {
    for (ChoicePiece& p : pieces) p.first = false;
    ex.respond({200, "application/json", dump(full_response(plan.meta, pieces, usage)), plan.headers});
    return;
  }
  const bool with_usage = plan.request.include_usage;
  ex.begin_stream(200, "text/event-stream", plan.headers);
  for (ChoicePiece& p : pieces) {
    std::string reason = std::move(p.finish_reason);
    p.finish_reason.clear();
    ex.write(sse_event(dump(stream_chunk(plan.meta, p, with_usage))));
    ex.write(sse_event(dump(stream_chunk(plan.meta, {p.index, {}, false, {}, std::move(reason), false}, with_usage))));
  }
  if (with_usage) ex.write(sse_event(dump(usage_chunk(plan.meta, usage))));
  ex.write(kSseDone);
  ex.end_stream();
}

}  // namespace llmserve::server
