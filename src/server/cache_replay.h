#pragma once
// A cached answer written as the request that found it asks: one JSON body,
// or SSE chunks (each choice's text in one chunk, then its finish, the usage
// chunk when asked, [DONE]), under the request's own id and created time.
#include "gateway/cached_answer.h"
#include "server/generation.h"
#include "server/http_server.h"

namespace llmserve::server {

void replay(const gateway::CachedAnswer& answer, const GenerationPlan& plan, size_t prompt_tokens, Exchange& ex);

}  // namespace llmserve::server
