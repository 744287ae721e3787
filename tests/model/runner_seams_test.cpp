// The runner's seams for what the engine builds on: the final hidden state
// of the wanted rows (embeddings) and a KV block moved between pools as
// bytes (disaggregated prefill/decode).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/runner.h"
#include "test_models.h"

using namespace llmserve;

namespace {

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  return t;
}

}  // namespace

// hidden() is what the output projection reads: output · hidden gives the
// logits, up to the int8 quantizing of the activations (3e-2 of the largest
// logit, as in test_fast_vs_reference.cpp).
TEST(RunnerSeams, HiddenStatesAreTheOutputProjectionsInput) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto m = model::Model::load(path);
  const model::HParams& hp = m->hparams();
  ThreadPool pool(2);
  model::KvCache kv(hp, 4, 16, gguf::TensorType::F16);
  model::ModelRunner runner(*m, kv, pool, 64);
  const auto tokens = some_tokens(20, hp.n_vocab);
  const std::vector<int32_t> table{0, 1};
  const model::SeqBatch s{tokens, 0, table, model::Logits::All, 20};
  const auto logits = runner.forward({&s, 1});
  const auto hidden = runner.hidden();
  ASSERT_EQ(hidden.size(), 20u * hp.dim);
  std::vector<float> w(static_cast<size_t>(hp.dim));
  for (int r = 0; r < 20; r += 7) {
    float diff = 0.0f, scale = 1e-6f;
    for (int v = 0; v < hp.n_vocab; ++v) {
      model::read_row(m->weights().output, v, w.data());
      double dot = 0.0;
      for (int i = 0; i < hp.dim; ++i) dot += static_cast<double>(w[i]) * hidden[static_cast<size_t>(r) * hp.dim + i];
      const float got = logits[static_cast<size_t>(r) * hp.n_vocab + v];
      diff = std::max(diff, std::abs(got - static_cast<float>(dot)));
      scale = std::max(scale, std::abs(got));
    }
    EXPECT_LE(diff / scale, 3e-2f) << "row " << r;
  }
}

// A prompt's KV exported from one pool and imported into other blocks of
// another gives the next token the same logits, bit for bit.
TEST(RunnerSeams, KvBlocksMoveBetweenPools) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto m = model::Model::load(path);
  const model::HParams& hp = m->hparams();
  ThreadPool pool(2);
  model::KvCache a(hp, 8, 16, gguf::TensorType::F16), b(hp, 8, 16, gguf::TensorType::F16);
  model::ModelRunner on_a(*m, a, pool, 64), on_b(*m, b, pool, 64);
  const auto tokens = some_tokens(33, hp.n_vocab);
  const std::vector<int32_t> table_a{0, 1, 2}, table_b{6, 4, 5};
  const model::SeqBatch prompt{std::span(tokens).first(32), 0, table_a, model::Logits::None, 32};
  on_a.forward({&prompt, 1});

  std::vector<uint8_t> bytes(a.block_bytes());
  for (int i = 0; i < 2; ++i) {
    a.export_block(table_a[i], bytes);
    b.import_block(table_b[i], bytes);
  }
  const model::SeqBatch next_a{std::span(tokens).last(1), 32, table_a, model::Logits::Last, 0};
  const model::SeqBatch next_b{std::span(tokens).last(1), 32, table_b, model::Logits::Last, 0};
  const auto la = on_a.forward({&next_a, 1});
  const std::vector<float> expect(la.begin(), la.end());
  const auto lb = on_b.forward({&next_b, 1});
  EXPECT_EQ(std::vector<float>(lb.begin(), lb.end()), expect);

  EXPECT_THROW(a.export_block(8, bytes), Error);
  EXPECT_THROW(b.import_block(0, std::span(bytes).first(bytes.size() - 1)), Error);
}

// A generated token's KV against what a prompt holding the same tokens
// computes: decode one token at a time, run the whole history as a prompt
// in another pool, compare every value. The matmuls give both the same
// bits; attention does not (a decode row takes the decode items, split
// over its keys when the batch has few items, and their merge rounds
// otherwise), so the two agree to the rounding of attention's sums, which
// compounds over the layers: within 1e-2 of the largest value here. The
// prefix cache offers generated blocks on that footing (docs/architecture.md).
TEST(RunnerSeams, DecodedKvIsThePromptsKvUpToAttentionRounding) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  const auto m = model::Model::load(path);
  const model::HParams& hp = m->hparams();
  ThreadPool pool(2);
  constexpr int kPrompt = 24, kTotal = 200;
  const int blocks = (kTotal + 15) / 16;
  model::KvCache a(hp, blocks, 16, gguf::TensorType::F32), b(hp, blocks, 16, gguf::TensorType::F32);
  model::ModelRunner on_a(*m, a, pool, 256), on_b(*m, b, pool, 256);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) table[static_cast<size_t>(i)] = i;
  const auto tokens = some_tokens(kTotal, hp.n_vocab);
  const model::SeqBatch prompt{std::span(tokens).first(kPrompt), 0, table, model::Logits::None, kPrompt};
  on_a.forward({&prompt, 1});
  for (int p = kPrompt; p < kTotal; ++p) {
    const model::SeqBatch one{std::span(tokens).subspan(static_cast<size_t>(p), 1), p, table, model::Logits::Last, 0};
    on_a.forward({&one, 1});
  }
  const model::SeqBatch all{tokens, 0, table, model::Logits::None, kTotal};
  on_b.forward({&all, 1});
  std::vector<uint8_t> ka(a.block_bytes()), kb(b.block_bytes());
  float diff = 0.0f, scale = 1e-6f;
  for (int i = 0; i < kTotal / 16; ++i) {
    a.export_block(i, ka);
    b.export_block(i, kb);
    const auto* x = reinterpret_cast<const float*>(ka.data());
    const auto* y = reinterpret_cast<const float*>(kb.data());
    for (size_t j = 0; j < ka.size() / sizeof(float); ++j) {
      diff = std::max(diff, std::abs(x[j] - y[j]));
      scale = std::max(scale, std::abs(y[j]));
    }
  }
  std::printf("decoded vs prompt KV: max |diff| %.3g of max |value| %.3g\n", diff, scale);
  EXPECT_LE(diff / scale, 1e-2f);
}
