#include "gateway/response_cache.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.h"

namespace llmserve::gateway {

namespace {

// `v`, or empty when it has no direction to compare (empty or all zeros).
std::span<const float> comparable(std::span<const float> v) {
  check_embedding(v);
  return std::ranges::any_of(v, [](float x) { return x != 0; }) ? v : std::span<const float>{};
}

// Embeddings of different lengths come from different embedders: never compared.
std::string semantic_index_name(const std::string& semantic_namespace, size_t dims) {
  return semantic_namespace + "#" + std::to_string(dims);
}

// What an entry holds besides its answer and key: its map and list nodes.
constexpr size_t kEntryOverhead = 160;

}  // namespace

ResponseCache::ResponseCache(CacheConfig config) : max_bytes_(config.max_bytes), clock_(std::move(config.clock)) {
  if (max_bytes_ == 0) throw Error("cache: max_bytes must be greater than 0");
}

void ResponseCache::set_semantic_tau(const std::string& model, double tau) {
  if (!(tau >= 0 && tau <= 1))
    throw Error("semantic cache threshold (tau) for model '" + model + "' must be between 0 and 1, not " +
                std::to_string(tau));
  std::unique_lock lock(mutex_);
  tau_[model] = static_cast<float>(tau);
}

CacheHit ResponseCache::hit_locked(const Entry& e, CacheLayer layer, float similarity) const {
  return CacheHit{e.answer, layer, similarity, e.created};
}

CacheLookup ResponseCache::lookup(const CacheKey& key, std::span<const float> embedding) {
  const auto start = std::chrono::steady_clock::now();
  const EncodedKey encoded = encode(key);
  const std::span<const float> query = comparable(embedding);
  const TimePoint now = clock_();
  CacheLookup result;
  std::optional<uint64_t> hit_id;
  std::vector<uint64_t> expired_ids;  // met by this lookup, removed after it
  {
    std::shared_lock lock(mutex_);
    ++exact_queries_;
    if (const auto it = exact_.find(encoded.exact); it != exact_.end()) {
      const Entry& e = entries_.at(it->second);
      if (e.expires > now) {
        result.hit = hit_locked(e, CacheLayer::Exact, 1);
        hit_id = it->second;
      } else {
        expired_ids.push_back(it->second);
      }
    }
    const auto tau = tau_.find(key.model);
    if (!hit_id && tau != tau_.end() && !query.empty()) {
      ++semantic_queries_;
      const auto index = semantic_.find(semantic_index_name(encoded.semantic_namespace, query.size()));
      if (index != semantic_.end()) {
        SemanticIndex::Nearest nearest = index->second.nearest(query, tau->second, now);
        if (const auto& match = nearest.match) {
          result.hit = hit_locked(entries_.at(match->id), CacheLayer::Semantic, match->similarity);
          hit_id = match->id;
        }
        expired_ids.insert(expired_ids.end(), nearest.expired.begin(), nearest.expired.end());
      }
    }
  }
  if (result.hit) ++(result.hit->layer == CacheLayer::Exact ? exact_hits_ : semantic_hits_);
  if (hit_id || !expired_ids.empty()) {
    std::unique_lock lock(mutex_);
    // Any may have been replaced or evicted since the shared lock.
    if (hit_id) {
      if (const auto it = entries_.find(*hit_id); it != entries_.end())
        lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    for (const uint64_t id : expired_ids) {
      if (const auto it = entries_.find(id); it != entries_.end() && it->second.expires <= now) {
        erase_locked(id);
        ++expirations_;
      }
    }
  }
  result.took = std::chrono::steady_clock::now() - start;
  return result;
}

bool ResponseCache::insert(const CacheKey& key, std::span<const float> embedding, CachedAnswer answer,
                           std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0)
    throw Error("cache TTL must be greater than 0, not " + std::to_string(ttl.count()) + " ms");
  EncodedKey encoded = encode(key);
  const std::span<const float> vector = comparable(embedding);
  const TimePoint now = clock_();
  Entry e;
  e.answer = std::make_shared<const CachedAnswer>(std::move(answer));
  e.created = now;
  e.expires = now + ttl;

  std::unique_lock lock(mutex_);
  const bool semantic = !vector.empty() && tau_.contains(key.model);
  if (semantic) e.semantic = semantic_index_name(encoded.semantic_namespace, vector.size());
  e.key = std::move(encoded.exact);
  e.bytes = kEntryOverhead + sizeof(Entry) + e.key.size() + e.semantic.size() + e.answer->bytes() +
            (semantic ? SemanticIndex::row_bytes(vector.size()) : 0);
  if (e.bytes > max_bytes_) return false;
  if (const auto it = exact_.find(e.key); it != exact_.end()) erase_locked(it->second);
  while (bytes_ + e.bytes > max_bytes_) {
    erase_locked(lru_.back());
    ++evictions_;
  }
  const uint64_t id = next_id_++;
  Entry& stored = entries_.emplace(id, std::move(e)).first->second;
  exact_.emplace(stored.key, id);
  if (semantic) {
    SemanticIndex& index = semantic_.try_emplace(stored.semantic, vector.size()).first->second;
    stored.row = index.add(vector, id, stored.expires);
  }
  lru_.push_front(id);
  stored.lru = lru_.begin();
  bytes_ += stored.bytes;
  ++insertions_;
  return true;
}

void ResponseCache::erase_locked(uint64_t id) {
  const auto it = entries_.find(id);
  Entry& e = it->second;
  exact_.erase(e.key);
  if (!e.semantic.empty()) {
    const auto index = semantic_.find(e.semantic);
    if (const auto moved = index->second.remove(e.row)) entries_.at(*moved).row = e.row;
    if (index->second.size() == 0) semantic_.erase(index);
  }
  lru_.erase(e.lru);
  bytes_ -= e.bytes;
  entries_.erase(it);
}

void ResponseCache::clear() {
  std::unique_lock lock(mutex_);
  exact_.clear();
  semantic_.clear();
  entries_.clear();
  lru_.clear();
  bytes_ = 0;
}

CacheStats ResponseCache::stats() const {
  CacheStats s;
  s.exact_queries = exact_queries_;
  s.exact_hits = exact_hits_;
  s.semantic_queries = semantic_queries_;
  s.semantic_hits = semantic_hits_;
  s.insertions = insertions_;
  s.evictions = evictions_;
  s.expirations = expirations_;
  std::shared_lock lock(mutex_);
  s.entries = entries_.size();
  s.bytes = bytes_;
  return s;
}

}  // namespace llmserve::gateway
