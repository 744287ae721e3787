#include "model/reference.h"

#include <cmath>

#include "core/error.h"

namespace llmserve::model {

namespace {

using Vec = std::vector<float>;

Vec matvec(const kernels::Matrix& w, const Vec& x) {
  Vec y(w.rows), row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    read_row(w, r, row.data());
    float acc = 0.0f;
    for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * x[c];
    y[r] = acc;
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& weight, float eps) {
  float ss = 0.0f;
  for (float v : x) ss += v * v;
  const float scale = 1.0f / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * weight[i];
  return y;
}

void add_bias(Vec& x, const Vec& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

}  // namespace

ReferenceModel::ReferenceModel(const Model& model) : m_(model), k_(model.hparams().n_layer), v_(model.hparams().n_layer) {}

std::vector<float> ReferenceModel::step(int32_t token) {
  const HParams& hp = m_.hparams();
  const Weights& w = m_.weights();
  if (token < 0 || token >= hp.n_vocab) throw Error("token id " + std::to_string(token) + " out of range");
  const int hd = hp.head_dim, kv_dim = hp.kv_dim(), group = hp.n_head / hp.n_head_kv;

  Vec x(hp.dim);
  read_row(w.token_embd, token, x.data());
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    const Vec h = rmsnorm(x, lw.attn_norm, hp.rms_eps);
    Vec q = matvec(lw.wq, h), k = matvec(lw.wk, h), v = matvec(lw.wv, h);
    add_bias(q, lw.bq);
    add_bias(k, lw.bk);
    add_bias(v, lw.bv);
    m_.rope().apply(q.data(), hp.n_head, pos_);
    m_.rope().apply(k.data(), hp.n_head_kv, pos_);
    k_[l].insert(k_[l].end(), k.begin(), k.end());
    v_[l].insert(v_[l].end(), v.begin(), v.end());

    const int n_pos = pos_ + 1;
    Vec att(hp.q_dim(), 0.0f), scores(n_pos);
    for (int head = 0; head < hp.n_head; ++head) {
      const int kvh = head / group;
      const float* qh = &q[head * hd];
      float max_score = -INFINITY;
      for (int t = 0; t < n_pos; ++t) {
        const float* kt = &k_[l][t * kv_dim + kvh * hd];
        float s = 0.0f;
        for (int i = 0; i < hd; ++i) s += qh[i] * kt[i];
        scores[t] = s / std::sqrt(static_cast<float>(hd));
        max_score = std::max(max_score, scores[t]);
      }
      float sum = 0.0f;
      for (int t = 0; t < n_pos; ++t) sum += scores[t] = std::exp(scores[t] - max_score);
      for (int t = 0; t < n_pos; ++t) {
        const float* vt = &v_[l][t * kv_dim + kvh * hd];
        for (int i = 0; i < hd; ++i) att[head * hd + i] += scores[t] / sum * vt[i];
      }
    }
    const Vec o = matvec(lw.wo, att);
    for (int i = 0; i < hp.dim; ++i) x[i] += o[i];

    const Vec h2 = rmsnorm(x, lw.ffn_norm, hp.rms_eps);
    const Vec gate = matvec(lw.w_gate, h2), up = matvec(lw.w_up, h2);
    Vec act(hp.ffn_dim);
    for (int i = 0; i < hp.ffn_dim; ++i) act[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    const Vec down = matvec(lw.w_down, act);
    for (int i = 0; i < hp.dim; ++i) x[i] += down[i];
  }
  ++pos_;
  hidden_ = rmsnorm(x, w.output_norm, hp.rms_eps);
  return matvec(w.output, hidden_);
}

}  // namespace llmserve::model
