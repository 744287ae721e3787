// Response cache lookups at 10,000 entries: an exact hit, a semantic hit
// (a flat scan over 288-, 1024- or 4096-dim embeddings) and the n-gram embedding of
// a prompt, the steps a cached answer costs before it is written out.
// Besides the mean, each reports p50_us and p99_us over its iterations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gateway/ngram_embedder.h"
#include "gateway/response_cache.h"

namespace {

using namespace llmserve::gateway;

constexpr int kPromptTokens = 200;

// Strings are assigned as std::string(...): GCC 12 at -O3 gives a false
// -Wrestrict warning on assigning some literals to these members.
CacheKey key(int i) {
  CacheKey k;
  k.tenant = std::string("tenant");
  k.model = std::string("m");
  k.endpoint = std::string("chat");
  k.max_tokens = 256;
  for (int t = 0; t < kPromptTokens; ++t) k.prompt_tokens.push_back(i * kPromptTokens + t);
  return k;
}

CachedAnswer answer() {
  CachedAnswer a;
  a.choices.push_back({std::string(1000, 'x'), std::vector<int32_t>(250, 1), "stop", ""});
  return a;
}

std::vector<float> random_unit(std::mt19937& rng, size_t dims) {
  std::normal_distribution<float> g;
  std::vector<float> v(dims);
  double n2 = 0;
  for (float& x : v) {
    x = g(rng);
    n2 += double{x} * x;
  }
  for (float& x : v) x /= static_cast<float>(std::sqrt(n2));
  return v;
}

// Runs `lookup` per iteration and records each one's time.
template <typename F>
void timed(benchmark::State& state, F lookup) {
  std::vector<double> us;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(lookup());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
}

void BM_ExactHit(benchmark::State& state) {
  const int entries = static_cast<int>(state.range(0));
  CacheConfig config;
  config.max_bytes = size_t{4} << 30;
  ResponseCache cache(config);
  for (int i = 0; i < entries; ++i) cache.insert(key(i), {}, answer(), std::chrono::hours(1));
  std::mt19937 rng(1);
  timed(state, [&] {
    const CacheLookup r = cache.lookup(key(static_cast<int>(rng() % entries)));
    if (!r.hit) state.SkipWithError("miss");
    return r.hit.has_value();
  });
}
BENCHMARK(BM_ExactHit)->Arg(10000)->Unit(benchmark::kMicrosecond);

// Args: entries, dims. Each query is a stored embedding plus a little noise: a hit.
void BM_SemanticHit(benchmark::State& state) {
  const int entries = static_cast<int>(state.range(0));
  const size_t dims = static_cast<size_t>(state.range(1));
  CacheConfig config;
  config.max_bytes = size_t{4} << 30;
  ResponseCache cache(config);
  cache.set_semantic_tau("m", 0.9);
  std::mt19937 rng(1);
  std::vector<std::vector<float>> queries;
  for (int i = 0; i < entries; ++i) {
    std::vector<float> e = random_unit(rng, dims);
    if (i % (entries / 64) == 0) {
      std::vector<float> q = e, noise = random_unit(rng, dims);
      for (size_t d = 0; d < dims; ++d) q[d] += 0.2f * noise[d];
      queries.push_back(std::move(q));
    }
    cache.insert(key(i), e, answer(), std::chrono::hours(1));
  }
  size_t next = 0;
  timed(state, [&] {
    const CacheLookup r = cache.lookup(key(-1), queries[next++ % queries.size()]);
    if (!r.hit || r.hit->layer != CacheLayer::Semantic) state.SkipWithError("no semantic hit");
    return r.hit.has_value();
  });
}
BENCHMARK(BM_SemanticHit)->Args({10000, 288})->Args({10000, 1024})->Args({10000, 4096})->Unit(benchmark::kMicrosecond);

void BM_NgramEmbed(benchmark::State& state) {
  const NgramEmbedder embedder({3, 5, static_cast<int>(state.range(0))});
  const std::string prompt =
      "Can you explain, in a few short paragraphs, how a transformer language model turns a prompt into its answer?";
  timed(state, [&] { return embedder.embed(prompt).size(); });
}
BENCHMARK(BM_NgramEmbed)->Arg(288)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
