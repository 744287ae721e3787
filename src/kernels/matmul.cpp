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
constexpr int64_t kTilePanels = kDecodeChunkPanels;  // chunks never straddle a tile
static_assert(kTilePanels % kPrefillChunkPanels == 0);
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

// Column slice s of w (see ColumnSlices): the same rows, fewer columns.
Matrix column_slice(const Matrix& w, const ColumnSlices& slices, int64_t s) {
  const auto info = gguf::type_info(w.type);
  Matrix out = w;
  if (w.data) out.data += static_cast<size_t>(s * slices.width / info->block_elems) * info->block_bytes;
  out.cols = slices.cols(s, w.cols);
  out.packed = nullptr;
  return out;
}

// Where slice s of panel q sits in prepared weights. The panels come in
// tiles of kTilePanels, a decode chunk: a tile holds slice 0 of its panels,
// then slice 1 of them, and so on, so a chunk is one stream front to back.
// Each slice as a panel set of its own, which makes decode jump between
// slices every chunk, measured slower: the down projection 0.68-1.00 of a
// read of the same bytes against 0.74-1.07 for tiles (tinyllama Q4_0, 6
// runs alternated in one process).
struct PackedLayout {
  PanelFormat format;
  int64_t cols, panels;
  ColumnSlices slices;

  PackedLayout(PanelFormat f, int64_t rows, int64_t c)
      : format(f), cols(c), panels(panel_count(rows)), slices(column_slices(c)) {}
  size_t slice_panel_bytes(int64_t s) const { return panel_bytes(format, slices.cols(s, cols)); }
  // One panel, all its slices.
  size_t whole_panel_bytes() const {
    return (slices.count - 1) * slice_panel_bytes(0) + slice_panel_bytes(slices.count - 1);
  }
  size_t total_bytes() const { return panels * whole_panel_bytes(); }
  size_t offset(int64_t q, int64_t s) const {
    const int64_t first = q / kTilePanels * kTilePanels, in_tile = std::min(kTilePanels, panels - first);
    return first * whole_panel_bytes() + in_tile * s * slice_panel_bytes(0) + (q - first) * slice_panel_bytes(s);
  }
};

// Bytes of w's panels (a multiple of 64); 0 for types without a panel kernel.
size_t packed_size(const Matrix& w) {
  check_shape(w);
  if (w.data == nullptr && w.rows > 0) throw Error("prepare: matrix without data");
  if (!has_own_panel_format(w.type)) return 0;
  return PackedLayout(panel_format(w.type), w.rows, w.cols).total_bytes();
}

// Packs w's panels at dst (packed_size(w) bytes) and points w.packed there.
void prepare_into(Matrix& w, uint8_t* dst, ThreadPool* pool) {
  if (!has_own_panel_format(w.type)) {
    w.packed = nullptr;
    return;
  }
  const PackedLayout layout(panel_format(w.type), w.rows, w.cols);
  std::vector<Matrix> slices;
  for (int64_t s = 0; s < layout.slices.count; ++s) slices.push_back(column_slice(w, layout.slices, s));
  auto pack = [&](int64_t q) {
    for (int64_t s = 0; s < layout.slices.count; ++s) pack_panel(slices[s], q, dst + layout.offset(q, s));
  };
  if (pool != nullptr) {
    pool->parallel_for(layout.panels, pack);
  } else {
    for (int64_t q = 0; q < layout.panels; ++q) pack(q);
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
  PackedLayout layout;
  const uint8_t* packed;  // null: pack each chunk on the fly
};

// Panels [p0, p1) of plans[plan], all their column slices: the unit of work.
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
    const PackedLayout layout(panel_format(t.w->type), t.w->rows, cols);
    plans.push_back({t.w, t.y, layout, has_own_panel_format(t.w->type) ? t.w->packed : nullptr});
    for (int64_t p0 = 0; p0 < layout.panels; p0 += max_chunk)
      chunks.push_back({plans.size() - 1, p0, std::min(layout.panels, p0 + max_chunk)});
    if (!plans.back().packed) own_bytes = std::max(own_bytes, max_chunk * layout.whole_panel_bytes());
    any_quantized |= is_quantized(layout.format);
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
    const PackedLayout& layout = p.layout;
    // Slice s of the chunk's panels starts at panels + slice_start(s), one
    // panel after another: in the prepared weights, or packed here for an
    // unprepared matrix.
    thread_local std::vector<CacheLine> panel_buf;
    uint8_t* own = p.packed ? nullptr : scratch(panel_buf, own_bytes / 64)->bytes;
    const uint8_t* panels = p.packed ? p.packed : own;
    auto slice_start = [&](int64_t s) -> size_t {
      return p.packed ? layout.offset(p0, s) : (p1 - p0) * s * layout.slice_panel_bytes(0);
    };
    if (!p.packed)
      for (int64_t s = 0; s < layout.slices.count; ++s) {
        const Matrix slice = column_slice(*p.w, layout.slices, s);
        for (int64_t q = p0; q < p1; ++q)
          pack_panel(slice, q, own + slice_start(s) + (q - p0) * layout.slice_panel_bytes(s));
      }
    const bool quantized = is_quantized(layout.format);
    PanelArgs a{};
    a.x_stride = quantized ? nb : cols;
    a.y_stride = p.w->rows;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
      a.n_tokens = std::min(token_block, n_tokens - t0);
      for (int64_t s = 0; s < layout.slices.count; ++s) {
        const int64_t c0 = s * layout.slices.width;
        a.cols = layout.slices.cols(s, cols);
        a.accumulate = s > 0;
        a.x = quantized ? static_cast<const void*>(acts + t0 * nb + c0 / kQBlock)
                        : static_cast<const void*>(x + t0 * cols + c0);
        const size_t pb = layout.slice_panel_bytes(s);
        for (int64_t q = p0; q < p1; ++q) {
          a.panel = panels + slice_start(s) + (q - p0) * pb;
          a.y = p.y + t0 * p.w->rows + q * kPanelRows;
          a.rows = static_cast<int>(std::min<int64_t>(kPanelRows, p.w->rows - q * kPanelRows));
          k.panel[static_cast<int>(layout.format)](a);
        }
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
