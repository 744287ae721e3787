#pragma once
// Stop strings over streamed text. Text that could be the start of a stop
// string is held back until the next piece shows whether it is one, so a
// stop string split across tokens never leaks to the client; the stop
// string itself is not part of the output (as in OpenAI's API).
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what may now be sent. After a stop string has
  // been found, stopped() is true and push() returns "".
  std::string push(std::string_view text);
  // The end of generation: returns whatever was held back.
  std::string flush();

  bool stopped() const { return stopped_; }
  // Bytes released so far; once stopped, where the stop string began.
  size_t emitted() const { return emitted_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;     // received, not yet released
  size_t emitted_ = 0;   // bytes released so far
  bool stopped_ = false;
};

}  // namespace llmserve::server
