// matmul driver: validates, quantizes the activations once, and hands chunks
// of panels to the threads.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
#include "kernels/large_alloc.h"
#include "kernels/panel.h"

namespace llmserve::kernels {

namespace {

void check_shape(const Matrix& w) {
  const auto info = gguf::type_info(w.type);
  if (!info) throw Error("matmul: unknown weight type id " + std::to_string(static_cast<int>(w.type)));
  if (w.rows < 0 || w.cols <= 0 || w.cols % info->block_elems != 0)
    throw Error("matmul: " + std::string(info->name) + " matrix with " + std::to_string(w.cols) +
                " columns (must be a positive multiple of " + std::to_string(info->block_elems) + ")");
  if (w.row_bytes < static_cast<size_t>(w.cols) / info->block_elems * info->block_bytes)
    throw Error("matmul: row_bytes " + std::to_string(w.row_bytes) + " too small for " +
                std::to_string(w.cols) + " " + std::string(info->name) + " columns");
  const bool packed_usable = w.packed != nullptr && has_own_panel_format(w.type);
  if (w.data == nullptr && !packed_usable && w.rows > 0) throw Error("matmul: matrix without data");
}

// Grows, never shrinks: hot paths allocate only until the largest shape has
// been seen once.
template <class T>
T* scratch(std::vector<T>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

struct alignas(64) CacheLine {
  uint8_t bytes[64];
};

// Work sizes (see matmul()): panels per chunk for one token and for many,
// and the activation bytes a block of tokens may take (about a quarter of a
// 1 MiB L2, leaving room for the chunk's panels).
constexpr int64_t kDecodeChunkPanels = 8;
constexpr int64_t kPrefillChunkPanels = 4;
constexpr int64_t kActivationBlockBytes = 256 << 10;

}  // namespace

const MatmulKernels& matmul_kernels(Isa isa) {
  switch (isa) {
    case Isa::avx512: return avx512::kMatmulKernels;
    case Isa::avx2: return avx2::kMatmulKernels;
    case Isa::scalar: break;
  }
  return scalar::kMatmulKernels;
}

PackedWeights::PackedWeights(size_t bytes) : size_(bytes) {
  void* p = allocate_large(bytes);
  if (p == nullptr && bytes > 0) throw Error("prepare: out of memory packing " + std::to_string(bytes) + " bytes");
  data_.reset(static_cast<uint8_t*>(p));
}

void PackedWeights::Free::operator()(uint8_t* p) const { std::free(p); }

namespace {

// Bytes of w's panels (a multiple of 64); 0 for types without a panel kernel.
size_t packed_size(const Matrix& w) {
  check_shape(w);
  if (w.data == nullptr && w.rows > 0) throw Error("prepare: matrix without data");
  if (!has_own_panel_format(w.type)) return 0;
  return static_cast<size_t>(panel_count(w.rows)) * panel_bytes(panel_format(w.type), w.cols);
}

// Packs w's panels at dst (packed_size(w) bytes) and points w.packed there.
void prepare_into(Matrix& w, uint8_t* dst, ThreadPool* pool) {
  if (!has_own_panel_format(w.type)) {
    w.packed = nullptr;
    return;
  }
  const int64_t np = panel_count(w.rows);
  const size_t pb = panel_bytes(panel_format(w.type), w.cols);
  auto pack = [&](int64_t p) { pack_panel(w, p, dst + p * pb); };
  if (pool != nullptr) {
    pool->parallel_for(np, pack);
  } else {
    for (int64_t p = 0; p < np; ++p) pack(p);
  }
  w.packed = dst;
}

}  // namespace

PackedWeights prepare_all(std::span<Matrix* const> ws, ThreadPool* pool) {
  std::vector<size_t> sizes;
  size_t total = 0;
  for (const Matrix* w : ws) total += sizes.emplace_back(packed_size(*w));
  PackedWeights out = total > 0 ? PackedWeights(total) : PackedWeights();
  size_t offset = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    prepare_into(*ws[i], out.data() + offset, pool);
    offset += sizes[i];
  }
  return out;
}

PackedWeights prepare(Matrix& w, ThreadPool* pool) {
  Matrix* one = &w;
  return prepare_all(std::span<Matrix* const>(&one, 1), pool);
}

namespace {

// One target of a matmul call.
struct Plan {
  const Matrix* w;
  float* y;
  PanelFormat format;
  const uint8_t* packed;  // null: pack each chunk on the fly
  size_t panel_bytes;
};

// Panels [p0, p1) of plans[plan]: the unit of work.
struct Chunk {
  size_t plan;
  int64_t p0, p1;
};

}  // namespace

void matmul(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool) {
  if (targets.empty() || n_tokens <= 0) return;
  const int64_t cols = targets[0].w->cols;
  const MatmulKernels& k = matmul_kernels(active_isa());

  // Panels are handed out in chunks, each thread starting on its own
  // contiguous share of them (parallel_for_shares): one long stream per
  // thread, and a thread the OS deschedules (cores shared with other work)
  // delays the call by at most one chunk. With many tokens a chunk is also
  // the set of panels that reuse a block of activations from L2.
  const int64_t max_chunk = n_tokens > 1 ? kPrefillChunkPanels : kDecodeChunkPanels;
  // The caller's buffers; workers reach them through the references.
  thread_local std::vector<Plan> plans_buf;
  thread_local std::vector<Chunk> chunks_buf;
  std::vector<Plan>& plans = plans_buf;
  std::vector<Chunk>& chunks = chunks_buf;
  plans.clear();
  chunks.clear();
  size_t own_bytes = 0;
  bool any_quantized = false;
  for (const MatmulTarget& t : targets) {
    check_shape(*t.w);
    if (t.w->cols != cols) throw Error("matmul: targets sharing an input must have the same number of columns");
    if (t.w->rows == 0) continue;
    const PanelFormat format = panel_format(t.w->type);
    plans.push_back({t.w, t.y, format, has_own_panel_format(t.w->type) ? t.w->packed : nullptr, panel_bytes(format, cols)});
    for (int64_t p0 = 0, n = panel_count(t.w->rows); p0 < n; p0 += max_chunk)
      chunks.push_back({plans.size() - 1, p0, std::min(n, p0 + max_chunk)});
    if (!plans.back().packed) own_bytes = std::max(own_bytes, max_chunk * plans.back().panel_bytes);
    any_quantized |= is_quantized(format);
  }
  if (plans.empty()) return;

  const int64_t nb = cols / kQBlock;
  const int64_t token_bytes = std::max<int64_t>(any_quantized ? nb * int64_t{sizeof(Q8Act)} : 0, cols * 4);
  const int64_t token_block = std::max<int64_t>(16, kActivationBlockBytes / token_bytes / 16 * 16);
  thread_local std::vector<Q8Act> acts_buf;
  Q8Act* acts = any_quantized ? scratch(acts_buf, static_cast<size_t>(n_tokens * nb)) : nullptr;
  if (any_quantized) {
    if (n_tokens == 1) k.quantize(x, cols, acts);  // decode: not worth a fork/join
    else pool.parallel_for(n_tokens, [&](int64_t t) { k.quantize(x + t * cols, cols, acts + t * nb); });
  }

  pool.parallel_for_shares(static_cast<int64_t>(chunks.size()), [&](int64_t c) {
    const Plan& p = plans[chunks[c].plan];
    const int64_t p0 = chunks[c].p0, p1 = chunks[c].p1;
    thread_local std::vector<CacheLine> panel_buf;  // this thread's packed chunk of an unprepared matrix
    uint8_t* own = p.packed ? nullptr : scratch(panel_buf, own_bytes / 64)->bytes;
    if (!p.packed)
      for (int64_t q = p0; q < p1; ++q) pack_panel(*p.w, q, own + (q - p0) * p.panel_bytes);
    PanelArgs a{};
    a.cols = cols;
    a.x_stride = cols;
    a.y_stride = p.w->rows;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
      a.n_tokens = std::min(token_block, n_tokens - t0);
      a.x = is_quantized(p.format) ? static_cast<const void*>(acts + t0 * nb) : static_cast<const void*>(x + t0 * cols);
      for (int64_t q = p0; q < p1; ++q) {
        a.panel = p.packed ? p.packed + q * p.panel_bytes : own + (q - p0) * p.panel_bytes;
        a.y = p.y + t0 * p.w->rows + q * kPanelRows;
        a.rows = static_cast<int>(std::min<int64_t>(kPanelRows, p.w->rows - q * kPanelRows));
        k.panel[static_cast<int>(p.format)](a);
      }
    }
  });
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const MatmulTarget target{&w, y};
  matmul(std::span<const MatmulTarget>(&target, 1), x, n_tokens, pool);
}

void matmul_reference(const Matrix& w, const float* x, int64_t n_tokens, float* y) {
  check_shape(w);
  if (w.data == nullptr && w.rows > 0) throw Error("matmul_reference: matrix without data");
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    gguf::dequantize_row(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.cols;
      double acc = 0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xt[c];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace llmserve::kernels
