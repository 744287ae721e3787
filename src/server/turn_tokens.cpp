#include "server/turn_tokens.h"

#include <algorithm>

namespace llmserve::server {

void TurnTokens::remember(std::string prompt_text, std::vector<int32_t> prompt, const std::vector<int32_t>& answer) {
  if (answer.empty() || capacity_ == 0) return;
  std::string text;
  for (int32_t t : answer) text += tok_.piece(t, true);
  std::lock_guard lock(mu_);
  const auto [it, inserted] = by_answer_.insert_or_assign(text, Turn{std::move(prompt_text), std::move(prompt), answer});
  if (!inserted) return;  // newest wins; its place in the order stays
  order_.push_back(it->first);
  if (order_.size() > capacity_) {
    by_answer_.erase(order_.front());
    order_.pop_front();
  }
}

std::vector<int32_t> TurnTokens::splice(const std::string& text, const std::string& answer,
                                        std::vector<int32_t> tokens) const {
  Turn turn;
  {
    std::lock_guard lock(mu_);
    const auto it = by_answer_.find(answer);
    if (it == by_answer_.end()) return tokens;
    turn = it->second;
  }
  // The text must go on from the remembered prompt with the answer, and the
  // new encoding must hold the prompt's tokens and end a token where the
  // answer ends.
  if (!text.starts_with(turn.prompt_text) || text.compare(turn.prompt_text.size(), answer.size(), answer) != 0)
    return tokens;
  if (tokens.size() < turn.prompt.size() || !std::equal(turn.prompt.begin(), turn.prompt.end(), tokens.begin()))
    return tokens;
  size_t end = turn.prompt.size(), bytes = 0;
  while (end < tokens.size() && bytes < answer.size()) bytes += text_bytes(tokens[end++]);
  if (bytes != answer.size()) return tokens;
  std::vector<int32_t> out = std::move(turn.prompt);
  out.insert(out.end(), turn.answer.begin(), turn.answer.end());
  out.insert(out.end(), tokens.begin() + static_cast<long>(end), tokens.end());
  return out;
}

}  // namespace llmserve::server
