#pragma once
// API keys and per-key request rate limits.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmserve::server {

// Compares in time that depends only on the lengths, so response timing
// does not reveal how much of a guessed key was right.
bool constant_time_equal(std::string_view a, std::string_view b);

// A set of accepted keys: the API keys, or the admin keys (DELETE /v1/cache).
class ApiKeys {
 public:
  ApiKeys() = default;  // no keys: the server is open
  explicit ApiKeys(std::vector<std::string> keys);
  // One key per line; blank lines and lines starting with '#' are skipped.
  // Throws Error naming the file when it cannot be read or holds no key.
  static ApiKeys from_file(const std::string& path);

  bool open() const { return keys_.empty(); }
  // The key from "Authorization: Bearer KEY" when it is valid; nullopt otherwise.
  std::optional<std::string> check(const std::string* authorization) const;
  size_t size() const { return keys_.size(); }
  // Whether a key is in both sets (the same key may not have two roles).
  bool shares_a_key_with(const ApiKeys& other) const;

 private:
  std::vector<std::string> keys_;
};

// A token bucket: `rate` tokens per second up to `burst`, starting full.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double rate, double burst, Clock::time_point now);
  // Takes `cost` tokens if there are that many; otherwise returns the time
  // until there will be.
  bool take(double cost, Clock::time_point now, double& retry_after_s);
  double tokens() const { return tokens_; }
  double seconds_to_full() const { return (burst_ - tokens_) / rate_; }

 private:
  double rate_, burst_, tokens_;
  Clock::time_point last_;
};

// What a key's bucket said about one request (OpenAI's x-ratelimit-*).
struct RateDecision {
  bool admitted = true;
  double retry_after_s = 0;  // refused: until one request's worth has refilled
  int limit = 0;             // the bucket's size, in requests
  int remaining = 0;         // whole requests left after this one
  double reset_s = 0;        // until the bucket is full again
};

// One bucket per API key (or per client address on an open server).
// Thread-safe. rate <= 0 means no limit.
class RateLimiter {
 public:
  RateLimiter(double requests_per_second, double burst, size_t max_keys = 100'000);
  bool enabled() const { return rate_ > 0; }
  RateDecision admit(const std::string& key, TokenBucket::Clock::time_point now = TokenBucket::Clock::now());

 private:
  double rate_, burst_;
  size_t max_keys_;
  std::mutex mu_;
  std::unordered_map<std::string, TokenBucket> buckets_;
};

// A duration as OpenAI's reset headers write it: "20ms", "8.64s", "6m0s", "1h2m5.5s".
std::string duration_text(double seconds);

}  // namespace llmserve::server
