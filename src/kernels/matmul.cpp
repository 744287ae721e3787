// matmul driver: validates, quantizes the activations once, and hands chunks
// of panels to the threads.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
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
  if (w.data == nullptr && w.packed == nullptr && w.rows > 0) throw Error("matmul: matrix without data");
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
constexpr int64_t kDecodeChunkPanels = 16;
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
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr && bytes > 0) throw Error("prepare: out of memory packing " + std::to_string(bytes) + " bytes");
  data_.reset(static_cast<uint8_t*>(p));
}

void PackedWeights::Free::operator()(uint8_t* p) const { std::free(p); }

PackedWeights prepare(Matrix& w, ThreadPool* pool) {
  check_shape(w);
  const PanelFormat format = panel_format(w.type);
  if (!has_own_panel_format(w.type)) {
    w.packed = nullptr;
    return {};
  }
  const int64_t np = panel_count(w.rows);
  const size_t pb = panel_bytes(format, w.cols);
  PackedWeights out(static_cast<size_t>(np) * pb);
  auto job = [&](int i, int n) {
    const auto [p0, p1] = ThreadPool::split(np, i, n);
    for (int64_t p = p0; p < p1; ++p) pack_panel(w, p, out.data() + p * pb);
  };
  if (pool != nullptr) pool->run(job);
  else job(0, 1);
  w.packed = out.data();
  return out;
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  check_shape(w);
  if (n_tokens <= 0 || w.rows == 0) return;
  const PanelFormat format = panel_format(w.type);
  const MatmulKernels& k = matmul_kernels(active_isa());
  const bool quantized = is_quantized(format);
  const int64_t nb = w.cols / kQBlock;
  const int64_t np = panel_count(w.rows);
  const size_t pb = panel_bytes(format, w.cols);
  const uint8_t* packed = has_own_panel_format(w.type) ? w.packed : nullptr;

  // Panels are handed out in chunks through a counter: a thread streams a
  // long contiguous run per chunk, and a thread the OS deschedules (cores
  // shared with other work) delays the op by one chunk, not by its share.
  // With many tokens a chunk is also the set of panels that reuse a block of
  // activations from L2, which bounds it from above.
  const int64_t max_chunk = n_tokens > 1 ? kPrefillChunkPanels : kDecodeChunkPanels;
  const int64_t chunk = std::clamp<int64_t>(np / (4 * pool.size()), 1, max_chunk);
  const int64_t n_chunks = (np + chunk - 1) / chunk;
  const int64_t token_bytes = quantized ? nb * static_cast<int64_t>(sizeof(Q8Act)) : w.cols * 4;
  const int64_t token_block = std::max<int64_t>(16, kActivationBlockBytes / token_bytes / 16 * 16);

  thread_local std::vector<Q8Act> acts_buf;  // the caller's; workers reach it through `acts`
  Q8Act* acts = quantized ? scratch(acts_buf, static_cast<size_t>(n_tokens * nb)) : nullptr;
  // One token (decode) is quantized here, which saves the barrier; more are
  // quantized in parallel inside the job.
  const bool quantize_in_job = quantized && n_tokens > 1;
  if (quantized && !quantize_in_job) k.quantize(x, w.cols, acts);

  std::atomic<int64_t> next{0};
  pool.run([&](int i, int n) {
    if (quantize_in_job) {
      const auto [t0, t1] = ThreadPool::split(n_tokens, i, n);
      for (int64_t t = t0; t < t1; ++t) k.quantize(x + t * w.cols, w.cols, acts + t * nb);
      pool.barrier();
    }
    thread_local std::vector<CacheLine> panel_buf;  // unprepared matrices: this thread's packed chunk
    uint8_t* own = packed ? nullptr : scratch(panel_buf, chunk * pb / 64)->bytes;
    PanelArgs a{};
    a.cols = w.cols;
    a.x_stride = w.cols;
    a.y_stride = w.rows;
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n_chunks;) {
      const int64_t p0 = c * chunk, p1 = std::min(np, p0 + chunk);
      if (!packed)
        for (int64_t p = p0; p < p1; ++p) pack_panel(w, p, own + (p - p0) * pb);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
        a.n_tokens = std::min(token_block, n_tokens - t0);
        a.x = quantized ? static_cast<const void*>(acts + t0 * nb) : static_cast<const void*>(x + t0 * w.cols);
        for (int64_t p = p0; p < p1; ++p) {
          a.panel = packed ? packed + p * pb : own + (p - p0) * pb;
          a.y = y + t0 * w.rows + p * kPanelRows;
          a.rows = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
          k.panel[static_cast<int>(format)](a);
        }
      }
    }
  });
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
