#include "model/llama_graph.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace llmserve::model {

namespace {

void add_bias(float* row, const std::vector<float>& bias) {
  if (!bias.empty()) kernels::add(row, bias.data(), static_cast<int64_t>(bias.size()), row);
}

}  // namespace

LlamaGraph::LlamaGraph(const Model& model, KvCache& kv, ThreadPool& pool, int max_rows)
    : m_(model), kv_(kv), pool_(pool) {
  const HParams& hp = m_.hparams();
  const size_t b = static_cast<size_t>(max_rows);
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
  bool prompt_path = false;
  for (const LayerWeights& lw : m_.weights().layers)
    for (const kernels::Matrix* mx : lw.matrices())
      prompt_path |= mx->type == gguf::TensorType::F16 || mx->type == gguf::TensorType::BF16;
  if (prompt_path) prompt_acts_.resize(kernels::prompt_acts_bytes(max_rows, widest) / sizeof(Line));
  jobs_.resize(hp.n_layer);
}

std::span<float> LlamaGraph::run(const BatchPlan& plan) {
  const HParams& hp = m_.hparams();
  const Weights& w = m_.weights();
  const int dim = hp.dim, q_dim = hp.q_dim(), kv_dim = hp.kv_dim(), ffn = hp.ffn_dim;
  const int n = plan.rows, n_prompt = plan.prompt_rows;
  const int n_out = static_cast<int>(plan.output_rows.size());
  const int n_summed = static_cast<int>(plan.summed_rows.size());
  const int n_summed_seqs = static_cast<int>(plan.summed_ends.size());

  // Everything that can throw (shapes, plans) happens here, before the
  // threads start: a team job must not throw.
  attn_seqs_.clear();
  for (const AttentionRun& r : plan.runs)
    attn_seqs_.push_back({&q_[static_cast<size_t>(r.row0) * q_dim], &att_[static_cast<size_t>(r.row0) * q_dim],
                          r.n_tokens, r.pos0, r.block_table});
  uint8_t* prompt_acts = prompt_acts_.empty() ? nullptr : prompt_acts_.data()->bytes;
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    jobs_[l] = {kernels::MatmulJob({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xn_.data(), n,
                                   acts_.data(), n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.wo, out_.data()}}, att_.data(), n, acts_.data(), n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, xn_.data(), n, acts_.data(),
                                   n_prompt, prompt_acts),
                kernels::MatmulJob({{&lw.w_down, out_.data()}}, gate_.data(), n, acts_.data(), n_prompt, prompt_acts)};
  }
  logits_.resize(static_cast<size_t>(n_out) * hp.n_vocab);  // grows to its steady size once
  summed_.resize(static_cast<size_t>(n_summed_seqs) * dim);
  // The output projection's rows are the wanted ones in batch order, few
  // and of either kind: all take the int8 path.
  const kernels::MatmulJob output({{&w.output, logits_.data()}}, xn_.data(), n_out, acts_.data());
  attention_.plan({hp.n_head, hp.n_head_kv, hp.head_dim}, kv_.layout(), attn_seqs_.data(),
                  static_cast<int>(attn_seqs_.size()), pool_.size());

  // Every thread runs this body; each step is over the rows (norms, RoPE,
  // the KV store, activation quantizing), one matmul's panel chunks, or
  // attention's items.
  const int32_t* tokens = plan.tokens.data();
  const int32_t* positions = plan.positions.data();
  const int32_t* slots = plan.slots.data();
  const int32_t* out_rows = plan.output_rows.data();
  const int32_t* summed_rows = plan.summed_rows.data();
  const int32_t* summed_ends = plan.summed_ends.data();
  auto row = [](std::vector<float>& v, int64_t r, int width) { return &v[static_cast<size_t>(r) * width]; };
  pool_.run_team([&](Team& team) {
    team.share(n, [&](int64_t r) { read_row(w.token_embd, tokens[r], row(x_, r, dim)); });
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
        m_.rope().apply(row(q_, r, q_dim), hp.n_head, positions[r]);
        m_.rope().apply(row(k_, r, kv_dim), hp.n_head_kv, positions[r]);
        kv_.store(l, row(k_, r, kv_dim), row(v_, r, kv_dim), &slots[r], 1);
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
    // The last FFN output joins the residual, then the final norm, only for
    // the rows whose outputs are wanted: the output projection's, then the
    // summed ones (xn_ rows n_out ..).
    team.share(n_out + n_summed, [&](int64_t i) {
      const int r = i < n_out ? out_rows[i] : summed_rows[i - n_out];
      kernels::add(row(x_, r, dim), row(out_, r, dim), dim, row(x_, r, dim));
      kernels::rmsnorm(row(x_, r, dim), w.output_norm.data(), hp.rms_eps, dim, 1, row(xn_, i, dim));
      if (i < n_out) output.prepare_row(i);
    });
    output.run(team);
    // Each sequence's rows in order, so its sum does not depend on the batch.
    team.share(n_summed_seqs, [&](int64_t j) {
      float* sum = row(summed_, j, dim);
      std::fill_n(sum, dim, 0.0f);
      for (int i = j > 0 ? summed_ends[j - 1] : 0; i < summed_ends[j]; ++i)
        kernels::add(sum, row(xn_, n_out + i, dim), dim, sum);
    });
  });
  hidden_ = std::span<const float>(xn_).first(static_cast<size_t>(n_out) * dim);
  return logits_;
}

}  // namespace llmserve::model
