#pragma once
// Server-sent events framing for streamed completions: each event is one
// "data:" line (JSON never holds a raw newline) and a blank line; the
// stream ends with "data: [DONE]".
#include <string>
#include <string_view>

namespace llmserve::server {

inline std::string sse_event(std::string_view json) {
  std::string e;
  e.reserve(json.size() + 8);
  e += "data: ";
  e += json;
  e += "\n\n";
  return e;
}

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace llmserve::server
