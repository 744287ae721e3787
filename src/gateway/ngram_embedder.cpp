#include "gateway/ngram_embedder.h"

#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "core/error.h"

namespace llmserve::gateway {

namespace {

constexpr int kMaxN = 16;

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool is_ascii_alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

NgramEmbedder::NgramEmbedder(NgramConfig config) : config_(config) {
  if (config.min_n < 1 || config.max_n < config.min_n || config.max_n > kMaxN)
    throw Error("n-gram embedder: n-gram sizes must satisfy 1 <= min <= max <= " + std::to_string(kMaxN) +
                ", not " + std::to_string(config.min_n) + ".." + std::to_string(config.max_n));
  if (config.dims < 1) throw Error("n-gram embedder: dims must be at least 1, not " + std::to_string(config.dims));
}

std::string NgramEmbedder::normalize(std::string_view text) {
  std::string out = " ";
  for (unsigned char c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    if (is_ascii_alnum(c) || c >= 0x80) out += static_cast<char>(c);
    else if (out.back() != ' ') out += ' ';
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

std::vector<float> NgramEmbedder::embed(std::string_view text) const {
  const std::string s = normalize(text);
  std::unordered_map<uint64_t, int> counts;  // n-gram hash -> occurrences
  for (int n = config_.min_n; n <= config_.max_n; ++n)
    for (size_t i = 0; i + n <= s.size(); ++i) ++counts[fnv1a(std::string_view(s).substr(i, n))];
  std::vector<float> v(config_.dims, 0.0f);
  double norm2 = 0;
  for (const auto& [hash, count] : counts) {
    const float weight = 1.0f + std::log(static_cast<float>(count));
    v[hash % config_.dims] += (hash >> 63) ? -weight : weight;
  }
  for (const float x : v) norm2 += double{x} * x;
  if (norm2 > 0)
    for (float& x : v) x = static_cast<float>(x / std::sqrt(norm2));
  return v;
}

}  // namespace llmserve::gateway
