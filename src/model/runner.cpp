#include "model/runner.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace llmserve::model {

namespace {

// Splits n rows of an elementwise op across the pool.
template <typename Fn>
void for_rows(ThreadPool& pool, int n, Fn fn) {
  if (n == 1) return fn(0, 1);
  pool.run([&](int i, int n_threads) {
    const auto [begin, end] = ThreadPool::split(n, i, n_threads);
    if (begin < end) fn(static_cast<int>(begin), static_cast<int>(end));
  });
}

void add_bias(float* x, const std::vector<float>& bias, int n_rows) {
  if (bias.empty()) return;
  for (int r = 0; r < n_rows; ++r) kernels::add(x + r * bias.size(), bias.data(), static_cast<int64_t>(bias.size()), x + r * bias.size());
}

}  // namespace

ModelRunner::ModelRunner(const Model& model, KvCache& kv, ThreadPool& pool, int max_tokens)
    : m_(model), kv_(kv), pool_(pool), max_tokens_(max_tokens) {
  if (max_tokens < 1) throw Error("the runner needs room for at least one token per step");
  const HParams& hp = m_.hparams();
  const size_t b = static_cast<size_t>(max_tokens);
  tokens_.resize(b);
  positions_.resize(b);
  slots_.resize(b);
  x_.resize(b * hp.dim);
  xn_.resize(b * std::max(hp.dim, hp.q_dim()));
  q_.resize(b * hp.q_dim());
  k_.resize(b * hp.kv_dim());
  v_.resize(b * hp.kv_dim());
  att_.resize(b * hp.q_dim());
  gate_.resize(b * hp.ffn_dim);
  up_.resize(b * hp.ffn_dim);
  out_.resize(b * hp.dim);
}

void ModelRunner::check(std::span<const SeqBatch> batch) const {
  const HParams& hp = m_.hparams();
  size_t rows = 0;
  for (const SeqBatch& s : batch) {
    if (s.tokens.empty()) throw Error("a sequence in the batch has no tokens");
    rows += s.tokens.size();
    const size_t end = static_cast<size_t>(s.pos0) + s.tokens.size();
    const size_t bs = static_cast<size_t>(kv_.block_size());
    if (s.pos0 < 0 || s.block_table.size() * bs < end)
      throw Error("a sequence's block table does not cover positions up to " + std::to_string(end));
    for (int32_t b : s.block_table.first((end + bs - 1) / bs))
      if (b < 0 || b >= kv_.n_blocks()) throw Error("block id " + std::to_string(b) + " is outside the KV pool");
    for (int32_t t : s.tokens)
      if (t < 0 || t >= hp.n_vocab) throw Error("token id " + std::to_string(t) + " is outside the vocabulary");
  }
  if (rows > static_cast<size_t>(max_tokens_))
    throw Error("the batch has " + std::to_string(rows) + " tokens, more than the runner's " +
                std::to_string(max_tokens_));
}

std::span<float> ModelRunner::forward(std::span<const SeqBatch> batch) {
  check(batch);
  const HParams& hp = m_.hparams();
  const Weights& w = m_.weights();
  const int dim = hp.dim, q_dim = hp.q_dim(), kv_dim = hp.kv_dim(), ffn = hp.ffn_dim;
  const int bs = kv_.block_size();

  // Flatten the batch into rows; remember where each sequence's rows are.
  int n = 0;
  attn_seqs_.clear();
  logit_rows_.clear();
  for (const SeqBatch& s : batch) {
    const int first = n;
    for (size_t i = 0; i < s.tokens.size(); ++i, ++n) {
      const int pos = s.pos0 + static_cast<int>(i);
      tokens_[n] = s.tokens[i];
      positions_[n] = pos;
      slots_[n] = s.block_table[pos / bs] * bs + pos % bs;
      if (s.logits == Logits::All || (s.logits == Logits::Last && i + 1 == s.tokens.size())) logit_rows_.push_back(n);
    }
    attn_seqs_.push_back({&q_[static_cast<size_t>(first) * q_dim], &att_[static_cast<size_t>(first) * q_dim],
                          static_cast<int>(s.tokens.size()), s.pos0, s.block_table.data()});
  }

  for (int r = 0; r < n; ++r) read_row(w.token_embd, tokens_[r], &x_[static_cast<size_t>(r) * dim]);
  const kernels::AttentionShape shape{hp.n_head, hp.n_head_kv, hp.head_dim};
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    for_rows(pool_, n, [&](int a, int b) {
      kernels::rmsnorm(&x_[size_t(a) * dim], lw.attn_norm.data(), hp.rms_eps, dim, b - a, &xn_[size_t(a) * dim]);
    });
    kernels::matmul({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xn_.data(), n, pool_);
    add_bias(q_.data(), lw.bq, n);
    add_bias(k_.data(), lw.bk, n);
    add_bias(v_.data(), lw.bv, n);
    for_rows(pool_, n, [&](int a, int b) {
      for (int r = a; r < b; ++r) {
        m_.rope().apply(&q_[size_t(r) * q_dim], hp.n_head, positions_[r]);
        m_.rope().apply(&k_[size_t(r) * kv_dim], hp.n_head_kv, positions_[r]);
      }
    });
    kv_.store(l, k_.data(), v_.data(), slots_.data(), n);
    kernels::attention(shape, kv_.layout(), kv_.k(l), kv_.v(l), attn_seqs_.data(), static_cast<int>(attn_seqs_.size()),
                       pool_);
    kernels::matmul(lw.wo, att_.data(), n, out_.data(), pool_);
    kernels::add(x_.data(), out_.data(), static_cast<int64_t>(n) * dim, x_.data());

    for_rows(pool_, n, [&](int a, int b) {
      kernels::rmsnorm(&x_[size_t(a) * dim], lw.ffn_norm.data(), hp.rms_eps, dim, b - a, &xn_[size_t(a) * dim]);
    });
    kernels::matmul({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, xn_.data(), n, pool_);
    for_rows(pool_, n, [&](int a, int b) {
      kernels::silu_mul(&gate_[size_t(a) * ffn], &up_[size_t(a) * ffn], int64_t(b - a) * ffn, &gate_[size_t(a) * ffn]);
    });
    kernels::matmul(lw.w_down, gate_.data(), n, out_.data(), pool_);
    kernels::add(x_.data(), out_.data(), static_cast<int64_t>(n) * dim, x_.data());
  }

  // Final norm and output projection only for the rows whose logits are wanted.
  const int n_out = static_cast<int>(logit_rows_.size());
  if (n_out == 0) return {};
  for (int i = 0; i < n_out; ++i)
    kernels::rmsnorm(&x_[size_t(logit_rows_[i]) * dim], w.output_norm.data(), hp.rms_eps, dim, 1, &xn_[size_t(i) * dim]);
  logits_.resize(static_cast<size_t>(n_out) * hp.n_vocab);  // grows to its steady size once
  kernels::matmul(w.output, xn_.data(), n_out, logits_.data(), pool_);
  return logits_;
}

SequenceRunner::SequenceRunner(const Model& model, ThreadPool& pool, int n_ctx, gguf::TensorType kv_type, int max_tokens)
    : n_ctx_(n_ctx),
      kv_(model.hparams(), (n_ctx + 15) / 16, 16, kv_type),
      runner_(model, kv_, pool, max_tokens) {
  block_table_.resize(kv_.n_blocks());
  for (int i = 0; i < kv_.n_blocks(); ++i) block_table_[i] = i;
}

std::span<float> SequenceRunner::eval(std::span<const int32_t> tokens, Logits logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw Error("eval needs at least one token");
  if (pos_ + n > n_ctx_)
    throw Error("context full: " + std::to_string(pos_ + n) + " positions needed, the context holds " +
                std::to_string(n_ctx_));
  if (logits == Logits::All) all_logits_.clear();
  std::span<float> out;
  for (int done = 0; done < n;) {
    const int chunk = std::min(runner_.max_tokens(), n - done);
    const bool last = done + chunk == n;
    const SeqBatch s{tokens.subspan(done, chunk), pos_, block_table_,
                     logits == Logits::All ? Logits::All : (last ? logits : Logits::None)};
    out = runner_.forward({&s, 1});
    if (logits == Logits::All) all_logits_.insert(all_logits_.end(), out.begin(), out.end());
    pos_ += chunk;
    done += chunk;
  }
  return logits == Logits::All ? std::span<float>(all_logits_) : out;
}

}  // namespace llmserve::model
