#pragma once
// The response cache: finished answers kept for identical requests (the
// exact layer) and for requests whose prompt means nearly the same (the
// semantic layer), so the server can answer them without generating.
//
// - Exact: the whole canonical key (cache_key.h) must match, byte for byte.
// - Semantic: among entries in the same namespace (tenant, model, endpoint
//   and every sampling parameter; only the prompt differs) and with
//   embeddings of the same length, the one whose prompt embedding is most
//   similar to the query's, a hit when the cosine similarity (of the int8
//   codes, semantic_index.h) is >= the model's tau. A model without a tau
//   has no semantic layer.
// Entries expire after their TTL, and a lookup removes the expired ones it
// meets; entries are evicted least recently used first to keep the counted
// bytes within `max_bytes`. All methods are safe to call from many threads;
// lookups scan under a shared lock.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/cache_key.h"
#include "gateway/cached_answer.h"
#include "gateway/semantic_index.h"

namespace llmserve::gateway {

struct CacheConfig {
  size_t max_bytes = size_t{256} << 20;
  std::function<TimePoint()> clock = [] { return std::chrono::steady_clock::now(); };  // tests inject their own
};

enum class CacheLayer { Exact, Semantic };

struct CacheHit {
  std::shared_ptr<const CachedAnswer> answer;
  CacheLayer layer = CacheLayer::Exact;
  float similarity = 1;  // the semantic layer's cosine; 1 for an exact hit
  TimePoint created;
};

struct CacheLookup {
  std::optional<CacheHit> hit;
  std::chrono::nanoseconds took{0};  // the lookup's own time, for a latency histogram
};

struct CacheStats {
  uint64_t exact_queries = 0;
  uint64_t exact_hits = 0;
  uint64_t semantic_queries = 0;  // lookups that reached the semantic layer
  uint64_t semantic_hits = 0;
  uint64_t insertions = 0;
  uint64_t evictions = 0;    // for the memory bound
  uint64_t expirations = 0;  // expired entries removed
  size_t entries = 0;
  size_t bytes = 0;
};

class ResponseCache {
 public:
  explicit ResponseCache(CacheConfig config = {});

  // Turns the semantic layer on for `model` with threshold tau in [0, 1].
  void set_semantic_tau(const std::string& model, double tau);

  // `embedding`: the prompt's embedding, any length up to
  // SemanticIndex::kMaxDims, or empty for none; only its direction counts.
  CacheLookup lookup(const CacheKey& key, std::span<const float> embedding = {});

  // Stores `answer` for `key` (replacing an entry with the same key) for
  // `ttl` (> 0); the embedding joins the semantic layer when the model has
  // one. Returns false when the entry alone exceeds max_bytes.
  bool insert(const CacheKey& key, std::span<const float> embedding, CachedAnswer answer,
              std::chrono::milliseconds ttl);

  void clear();
  CacheStats stats() const;

 private:
  struct Entry {
    std::string key;       // the exact key
    std::string semantic;  // the semantic index it is in; empty for none
    size_t row = 0;
    std::shared_ptr<const CachedAnswer> answer;
    TimePoint created;
    TimePoint expires;
    size_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };
  void erase_locked(uint64_t id);
  CacheHit hit_locked(const Entry& e, CacheLayer layer, float similarity) const;

  const size_t max_bytes_;
  const std::function<TimePoint()> clock_;

  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<std::string_view, uint64_t> exact_;  // views of entries_' keys
  std::unordered_map<std::string, SemanticIndex> semantic_;
  std::unordered_map<std::string, float> tau_;  // by model
  std::list<uint64_t> lru_;                      // most recently used first
  uint64_t next_id_ = 0;
  size_t bytes_ = 0;

  std::atomic<uint64_t> exact_queries_{0}, exact_hits_{0}, semantic_queries_{0}, semantic_hits_{0};
  std::atomic<uint64_t> insertions_{0}, evictions_{0}, expirations_{0};
};

}  // namespace llmserve::gateway
