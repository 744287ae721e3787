#include "model/weights.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/file.h"
#include "gguf/quant.h"

namespace llmserve::model {

namespace {

// Collects every problem before failing, so one error lists them all.
class TensorFinder {
 public:
  explicit TensorFinder(const gguf::File& f) : f_(f) {}

  // A matrix with GGUF dims {cols, rows}.
  kernels::Matrix matrix(const std::string& name, uint64_t cols, uint64_t rows, bool required = true) {
    const gguf::TensorInfo* t = get(name, required);
    if (!t) return {};
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      problem(name + " has shape " + shape(t->dims) + ", expected [" + std::to_string(cols) + ", " +
              std::to_string(rows) + "]");
      return {};
    }
    return kernels::Matrix{t->type, t->data, static_cast<int64_t>(rows), static_cast<int64_t>(cols),
                           static_cast<size_t>(gguf::row_bytes(t->type, cols))};
  }

  std::vector<float> vector(const std::string& name, uint64_t n, bool required = true) {
    const gguf::TensorInfo* t = get(name, required);
    if (!t) return {};
    if (t->n_elems != n) {
      problem(name + " has shape " + shape(t->dims) + ", expected [" + std::to_string(n) + "]");
      return {};
    }
    std::vector<float> v(n);
    gguf::dequantize_row(t->type, t->data, v.data(), static_cast<int64_t>(n));
    return v;
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  void throw_if_problems() const {
    if (problems_.empty()) return;
    std::string msg = f_.path() + ": model tensors are missing or mis-shaped:";
    for (const auto& p : problems_) msg += "\n  " + p;
    throw Error(msg);
  }

 private:
  const gguf::TensorInfo* get(const std::string& name, bool required) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t && required) problem("missing tensor " + name);
    return t;
  }
  void problem(std::string p) { problems_.push_back(std::move(p)); }
  static std::string shape(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

  const gguf::File& f_;
  std::vector<std::string> problems_;
};

// Converts each matrix to `type` into one new allocation; the matrices then
// point into it.
kernels::PackedWeights requantize_all(const std::vector<kernels::Matrix*>& matrices, gguf::TensorType type, ThreadPool* pool) {
  if (type != gguf::TensorType::Q8_0 && type != gguf::TensorType::Q4_0)
    throw Error("weights can be requantized to q8_0 or q4_0, not " + std::string(gguf::type_info(type)->name));
  std::vector<kernels::Matrix*> todo;
  size_t bytes = 0;
  for (kernels::Matrix* m : matrices) {
    if (m->cols % 32 != 0 || m->type == type) continue;
    todo.push_back(m);
    bytes += static_cast<size_t>(m->rows) * gguf::row_bytes(type, static_cast<uint64_t>(m->cols));
  }
  kernels::PackedWeights out(bytes);
  uint8_t* next = out.data();
  for (kernels::Matrix* m : todo) {
    const size_t row_bytes = gguf::row_bytes(type, static_cast<uint64_t>(m->cols));
    auto convert = [&, m, dst = next](int64_t r) {
      std::vector<float> row(static_cast<size_t>(m->cols));
      gguf::dequantize_row(m->type, m->data + static_cast<size_t>(r) * m->row_bytes, row.data(), m->cols);
      gguf::quantize_row(type, row.data(), dst + static_cast<size_t>(r) * row_bytes, m->cols);
    };
    if (pool) {
      pool->parallel_for(m->rows, convert);
    } else {
      for (int64_t r = 0; r < m->rows; ++r) convert(r);
    }
    *m = kernels::Matrix{type, next, m->rows, m->cols, row_bytes};
    next += static_cast<size_t>(m->rows) * row_bytes;
  }
  return out;
}

}  // namespace

Weights load_weights(const gguf::File& f, const HParams& hp, ThreadPool* pool, std::optional<gguf::TensorType> requantize) {
  TensorFinder find(f);
  Weights w;
  const uint64_t dim = hp.dim, q_dim = hp.q_dim(), kv_dim = hp.kv_dim(), ffn = hp.ffn_dim, vocab = hp.n_vocab;
  w.token_embd = find.matrix("token_embd.weight", dim, vocab);
  w.output_norm = find.vector("output_norm.weight", dim);
  // Tied embeddings: files without output.weight reuse token_embd.
  w.output = find.has("output.weight") ? find.matrix("output.weight", dim, vocab) : w.token_embd;
  if (find.has("rope_freqs.weight")) w.rope_freqs = find.vector("rope_freqs.weight", hp.rope_dim / 2);

  w.layers.resize(hp.n_layer);
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = find.vector(p + "attn_norm.weight", dim);
    l.wq = find.matrix(p + "attn_q.weight", dim, q_dim);
    l.wk = find.matrix(p + "attn_k.weight", dim, kv_dim);
    l.wv = find.matrix(p + "attn_v.weight", dim, kv_dim);
    l.wo = find.matrix(p + "attn_output.weight", q_dim, dim);
    if (hp.qkv_bias) {
      l.bq = find.vector(p + "attn_q.bias", q_dim);
      l.bk = find.vector(p + "attn_k.bias", kv_dim);
      l.bv = find.vector(p + "attn_v.bias", kv_dim);
    }
    l.ffn_norm = find.vector(p + "ffn_norm.weight", dim);
    l.w_gate = find.matrix(p + "ffn_gate.weight", dim, ffn);
    l.w_up = find.matrix(p + "ffn_up.weight", dim, ffn);
    l.w_down = find.matrix(p + "ffn_down.weight", ffn, dim);
  }
  find.throw_if_problems();

  // token_embd is only read a row at a time (read_row); `output` is
  // repacked even when it is the tied embedding. All matrices share one
  // allocation, in the order decode reads them.
  std::vector<kernels::Matrix*> order;
  for (LayerWeights& l : w.layers)
    for (kernels::Matrix* m : l.matrices()) order.push_back(m);
  order.push_back(&w.output);
  if (requantize) w.requantized = requantize_all(order, *requantize, pool);
  w.packed = kernels::prepare_all(order, pool);
  // Each decode step reads one embedding row, most often one not read
  // before. Read from the file mapping, such a row took 30-90 us on the
  // Zen 5 host (a virtual machine; `bench`, tinyllama Q8_0, timed in the
  // forward pass; the same row read again: 1 us), up to 4% of a
  // stories110m token, whether or not its pages had been faulted in
  // (MADV_POPULATE_READ) or touched at load, and as slow from a copy in
  // 4 KiB pages; from a copy in transparent huge pages
  // (kernels::PackedWeights), 6-11 us. stories110m Q8_0 decoded 1.028x as
  // fast (scripts/ab_bench.py --field tg_tps, 8 rounds, 1.004-1.056). It
  // costs memory of the embedding's size (tinyllama Q8_0 70 MB, 6% of its
  // weights).
  const size_t embd_bytes = static_cast<size_t>(w.token_embd.rows) * w.token_embd.row_bytes;
  w.embd_rows = kernels::PackedWeights(embd_bytes);
  std::memcpy(w.embd_rows.data(), w.token_embd.data, embd_bytes);
  w.token_embd.data = w.embd_rows.data();
  return w;
}

MatmulFootprint matmul_footprint(const Weights& w) {
  MatmulFootprint f;
  auto count = [&](const kernels::Matrix& m) {
    f.bytes += static_cast<uint64_t>(m.rows) * m.row_bytes;
    f.params += static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
  };
  count(w.output);
  for (const LayerWeights& l : w.layers)
    for (const kernels::Matrix* m : l.matrices()) count(*m);
  return f;
}

void read_row(const kernels::Matrix& m, int64_t row, float* out) {
  gguf::dequantize_row(m.type, m.data + static_cast<size_t>(row) * m.row_bytes, out, m.cols);
}

}  // namespace llmserve::model
