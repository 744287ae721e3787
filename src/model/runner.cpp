#include "model/runner.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace llmserve::model {

namespace {

// Steps of one forward pass (ThreadPool::run_team): the embedding, eleven
// per layer, and the output norm and projection.
constexpr int kStepsPerLayer = 11;
int forward_steps(int n_layer) { return 1 + kStepsPerLayer * n_layer + 2; }

void add_bias(float* row, const std::vector<float>& bias) {
  if (!bias.empty()) kernels::add(row, bias.data(), static_cast<int64_t>(bias.size()), row);
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
  const int64_t widest = std::max({hp.dim, hp.q_dim(), hp.ffn_dim});
  acts_.resize(b * static_cast<size_t>(widest / kernels::kQBlock));
  // Only f16 and bf16 weights have a prompt path (kernels/matmul.h), on
  // some CPUs: the buffer is there whichever the kernels take later.
  const Weights& w = m_.weights();
  bool prompt_path = false;
  for (const LayerWeights& lw : w.layers)
    for (const kernels::Matrix* mx : lw.matrices())
      prompt_path |= mx->type == gguf::TensorType::F16 || mx->type == gguf::TensorType::BF16;
  if (prompt_path) prompt_acts_.resize(kernels::prompt_acts_bytes(max_tokens, widest) / sizeof(Line));
  jobs_.resize(hp.n_layer);
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
    if (s.prompt_tokens < 0 || static_cast<size_t>(s.prompt_tokens) > s.tokens.size())
      throw Error("a sequence's prompt_tokens " + std::to_string(s.prompt_tokens) + " is outside 0.." +
                  std::to_string(s.tokens.size()));
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

  // Flatten the batch into rows, the prompt tokens of every sequence first
  // (the matmuls' prompt-path rows, for f16 and bf16 weights), then the
  // generated ones; a sequence with both attends as two runs, the second
  // seeing the first's KV, stored before attention runs. seq_rows_[i]: the
  // row of the batch's i-th token.
  int n = 0, n_prompt = 0;
  attn_seqs_.clear();
  seq_rows_.clear();
  for (const SeqBatch& s : batch) seq_rows_.resize(seq_rows_.size() + s.tokens.size());
  for (int part = 0; part < 2; ++part) {
    size_t token0 = 0;  // the sequence's first token in seq_rows_
    for (const SeqBatch& s : batch) {
      const int begin = part == 0 ? 0 : s.prompt_tokens;
      const int end = part == 0 ? s.prompt_tokens : static_cast<int>(s.tokens.size());
      if (begin < end) {
        attn_seqs_.push_back({&q_[static_cast<size_t>(n) * q_dim], &att_[static_cast<size_t>(n) * q_dim], end - begin,
                              s.pos0 + begin, s.block_table.data()});
      }
      for (int i = begin; i < end; ++i, ++n) {
        const int pos = s.pos0 + i;
        tokens_[n] = s.tokens[i];
        positions_[n] = pos;
        slots_[n] = s.block_table[pos / bs] * bs + pos % bs;
        seq_rows_[token0 + i] = n;
      }
      token0 += s.tokens.size();
    }
    if (part == 0) n_prompt = n;
  }
  logit_rows_.clear();
  size_t token0 = 0;
  for (const SeqBatch& s : batch) {
    for (size_t i = 0; i < s.tokens.size(); ++i)
      if (s.logits == Logits::All || (s.logits == Logits::Last && i + 1 == s.tokens.size()))
        logit_rows_.push_back(seq_rows_[token0 + i]);
    token0 += s.tokens.size();
  }

  // Everything that can throw (shapes, plans) happens here, before the
  // threads start: a team job must not throw.
  const int n_out = static_cast<int>(logit_rows_.size());
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    uint8_t* prompt_acts = prompt_acts_.empty() ? nullptr : prompt_acts_.data()->bytes;
    jobs_[l] = {kernels::MatmulJob({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xn_.data(), n,
                                   acts_.data(), n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.wo, out_.data()}}, att_.data(), n, acts_.data(), n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, xn_.data(), n, acts_.data(),
                                   n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.w_down, out_.data()}}, gate_.data(), n, acts_.data(), n_prompt, prompt_acts)};
  }
  logits_.resize(static_cast<size_t>(n_out) * hp.n_vocab);  // grows to its steady size once
  // The output projection's rows are the wanted logits in batch order, few
  // and of either kind: all take the int8 path.
  const kernels::MatmulJob output({{&w.output, logits_.data()}}, xn_.data(), n_out, acts_.data());
  attention_.plan({hp.n_head, hp.n_head_kv, hp.head_dim}, kv_.layout(), attn_seqs_.data(),
                  static_cast<int>(attn_seqs_.size()), pool_.size());

  // One job for the whole pass, every thread running this body; each step
  // is over the rows (norms, RoPE, the KV store, activation quantizing),
  // one matmul's panel chunks, or attention's items.
  auto row = [](std::vector<float>& v, int64_t r, int width) { return &v[static_cast<size_t>(r) * width]; };
  pool_.run_team(forward_steps(hp.n_layer), [&](Team& team) {
    team.share(n, [&](int64_t r) { read_row(w.token_embd, tokens_[r], row(x_, r, dim)); });
    for (int l = 0; l < hp.n_layer; ++l) {
      const LayerWeights& lw = w.layers[l];
      const LayerJobs& job = jobs_[l];
      team.share(n, [&](int64_t r) {
        // The previous layer's FFN output joins the residual stream here.
        if (l > 0) kernels::add(row(x_, r, dim), row(out_, r, dim), dim, row(x_, r, dim));
        kernels::rmsnorm(row(x_, r, dim), lw.attn_norm.data(), hp.rms_eps, dim, 1, row(xn_, r, dim));
        job.qkv.prepare_row(r);
      });
      job.qkv.run(team);
      team.share(n, [&](int64_t r) {
        add_bias(row(q_, r, q_dim), lw.bq);
        add_bias(row(k_, r, kv_dim), lw.bk);
        add_bias(row(v_, r, kv_dim), lw.bv);
        m_.rope().apply(row(q_, r, q_dim), hp.n_head, positions_[r]);
        m_.rope().apply(row(k_, r, kv_dim), hp.n_head_kv, positions_[r]);
        kv_.store(l, row(k_, r, kv_dim), row(v_, r, kv_dim), &slots_[r], 1);
      });
      team.queue(attention_.items(), [&](int64_t i) { attention_.run_item(i, kv_.k(l), kv_.v(l)); });
      team.queue(attention_.merges(), [&](int64_t i) { attention_.run_merge(i); });
      team.share(n, [&](int64_t r) { job.o.prepare_row(r); });
      job.o.run(team);
      team.share(n, [&](int64_t r) {
        kernels::add(row(x_, r, dim), row(out_, r, dim), dim, row(x_, r, dim));
        kernels::rmsnorm(row(x_, r, dim), lw.ffn_norm.data(), hp.rms_eps, dim, 1, row(xn_, r, dim));
        job.gate_up.prepare_row(r);
      });
      job.gate_up.run(team);
      team.share(n, [&](int64_t r) {
        kernels::silu_mul(row(gate_, r, ffn), row(up_, r, ffn), ffn, row(gate_, r, ffn));
        job.down.prepare_row(r);
      });
      job.down.run(team);
    }
    // The last FFN output joins the residual, then the final norm and the
    // output projection, only for the rows whose logits are wanted.
    team.share(n_out, [&](int64_t i) {
      const int r = logit_rows_[i];
      kernels::add(row(x_, r, dim), row(out_, r, dim), dim, row(x_, r, dim));
      kernels::rmsnorm(row(x_, r, dim), w.output_norm.data(), hp.rms_eps, dim, 1, row(xn_, i, dim));
      output.prepare_row(i);
    });
    output.run(team);
  });
  return logits_;
}

SequenceRunner::SequenceRunner(const Model& model, ThreadPool& pool, int n_ctx, gguf::TensorType kv_type, int max_tokens)
    : n_ctx_(n_ctx),
      kv_(model.hparams(), (n_ctx + 15) / 16, 16, kv_type),
      runner_(model, kv_, pool, max_tokens) {
  block_table_.resize(kv_.n_blocks());
  for (int i = 0; i < kv_.n_blocks(); ++i) block_table_[i] = i;
}

void SequenceRunner::check_room(int n) const {
  if (pos_ + n > n_ctx_)
    throw Error("context full: " + std::to_string(pos_ + n) + " positions needed, the context holds " +
                std::to_string(n_ctx_));
}

std::span<float> SequenceRunner::eval(std::span<const int32_t> tokens, Logits logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw Error("eval needs at least one token");
  check_room(n);
  if (logits == Logits::All) all_logits_.clear();
  std::span<float> out;
  for (int done = 0; done < n;) {
    const int chunk = std::min(runner_.max_tokens(), n - done);
    const bool last = done + chunk == n;
    const SeqBatch s{tokens.subspan(done, chunk), pos_, block_table_,
                     logits == Logits::All ? Logits::All : (last ? logits : Logits::None), chunk};
    out = runner_.forward({&s, 1});
    if (logits == Logits::All) all_logits_.insert(all_logits_.end(), out.begin(), out.end());
    pos_ += chunk;
    done += chunk;
  }
  return logits == Logits::All ? std::span<float>(all_logits_) : out;
}

std::span<float> SequenceRunner::decode(int32_t token) {
  check_room(1);
  const SeqBatch s{{&token, 1}, pos_, block_table_, Logits::Last, 0};
  const auto out = runner_.forward({&s, 1});
  ++pos_;
  return out;
}

}  // namespace llmserve::model
