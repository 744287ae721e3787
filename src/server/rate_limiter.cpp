#include "server/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace llmserve::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer string is read whatever the contents; the
  // length difference is folded in rather than returned early.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

ApiKeys::ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {
  for (const auto& k : keys_)
    if (k.empty()) throw Error("an API key cannot be empty");
}

ApiKeys ApiKeys::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the key file");
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.push_back(line.substr(b));
  }
  if (keys.empty()) throw Error(path + ": the key file holds no key");
  return ApiKeys(std::move(keys));
}

std::optional<std::string> ApiKeys::check(const std::string* authorization) const {
  if (!authorization) return std::nullopt;
  std::string_view v = *authorization;
  constexpr std::string_view bearer = "Bearer ";
  if (v.size() < bearer.size() || !std::equal(bearer.begin(), bearer.end(), v.begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
      }))
    return std::nullopt;
  v.remove_prefix(bearer.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  bool found = false;
  for (const auto& k : keys_) found |= constant_time_equal(v, k);  // no early exit
  if (!found) return std::nullopt;
  return std::string(v);
}

bool ApiKeys::shares_a_key_with(const ApiKeys& other) const {
  return std::any_of(keys_.begin(), keys_.end(), [&](const std::string& k) {
    return std::find(other.keys_.begin(), other.keys_.end(), k) != other.keys_.end();
  });
}

TokenBucket::TokenBucket(double rate, double burst, Clock::time_point now)
    : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}

bool TokenBucket::take(double cost, Clock::time_point now, double& retry_after_s) {
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
    last_ = now;
  }
  if (tokens_ >= cost) {
    tokens_ -= cost;
    return true;
  }
  retry_after_s = (cost - tokens_) / rate_;
  return false;
}

RateLimiter::RateLimiter(double requests_per_second, double burst, size_t max_keys)
    : rate_(requests_per_second), burst_(std::max(1.0, burst)), max_keys_(max_keys) {}

RateDecision RateLimiter::admit(const std::string& key, TokenBucket::Clock::time_point now) {
  if (rate_ <= 0) return {};
  std::lock_guard lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    // Bounded memory under many distinct keys (e.g. client addresses):
    // forgetting all buckets only ever grants a fresh burst.
    if (buckets_.size() >= max_keys_) buckets_.clear();
    it = buckets_.emplace(key, TokenBucket(rate_, burst_, now)).first;
  }
  RateDecision d;
  d.admitted = it->second.take(1.0, now, d.retry_after_s);
  d.limit = static_cast<int>(burst_);
  d.remaining = static_cast<int>(it->second.tokens());
  d.reset_s = it->second.seconds_to_full();
  return d;
}

std::string duration_text(double seconds) {
  if (!(seconds > 0)) return "0s";
  if (seconds < 1) return std::to_string(static_cast<int>(std::ceil(seconds * 1000))) + "ms";
  auto ms = static_cast<int64_t>(std::ceil(seconds * 1000));
  std::string out;
  if (ms >= 3'600'000) {
    out += std::to_string(ms / 3'600'000) + "h";
    ms %= 3'600'000;
  }
  if (!out.empty() || ms >= 60'000) {
    out += std::to_string(ms / 60'000) + "m";
    ms %= 60'000;
  }
  char s[32];
  std::snprintf(s, sizeof s, "%.3f", static_cast<double>(ms) / 1000);
  std::string sec = s;
  while (sec.back() == '0') sec.pop_back();
  if (sec.back() == '.') sec.pop_back();
  return out + sec + "s";
}

}  // namespace llmserve::server
