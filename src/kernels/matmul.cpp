// matmul driver: validates, quantizes the activations once, and hands chunks
// of panels to the threads.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
#include "kernels/isa_kernels.h"
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

// Work sizes (see MatmulJob): panels per tile of the packed weights (the
// stream decode claims at once, Team::share_ranges), per run for many
// tokens, and the activation bytes a chunk's block of tokens may take
// (about a quarter of a 1 MiB L2, leaving room for the run's panels).
// Up to a block of tokens (kActGroup) a run is one panel, so that the
// threads can share a matmul's last tile panel by panel.
constexpr int64_t kTilePanels = 8;
constexpr int64_t kPrefillChunkPanels = 8;
static_assert(kTilePanels % kPrefillChunkPanels == 0);  // chunks never straddle a tile
constexpr int64_t kActivationBlockBytes = 256 << 10;
// Tokens from which f16 / bf16 chunks are widened to f32 (MatmulKernels::
// widen): one conversion per weight vector instead of one per vector and
// token tile, but the f32 panels are written out and read back, twice the
// bytes: worth it from about this many tokens on.
constexpr int64_t kWidenTokens = 128;
// The AMX and int16 paths' chunks: runs of 8 panels, whose unpacked copy
// (int8: 44 bytes per panel and column, 1.9 MiB for 8 panels of 5632
// columns; bf16: 32, twice that for f16; int16: 34) is reused by blocks of
// tokens of about kActivationBlockBytes, a whole number of 2-group tiles
// (int16: of groups). 8 panels measured best for the AMX paths; the int16
// path measured level at 4 and 16.
constexpr int64_t kAmxChunkPanels = 8;
static_assert(kAmxChunkPanels <= amx::kInt8MaxPanels);
// prompt_acts_bytes() is the AMX-BF16 layout's size (two parts of 16 x 32
// values a group and block); the int16 layout's records are smaller.
static_assert(int16::kBlockBytes <= 2 * kBf16TileValues * 2);
constexpr int64_t kAmxTileTokens = 32;
// Tokens from which quantized matmuls take the AMX-INT8 tiles: each chunk
// unpacks its panels first, which fewer tokens do not repay (below 64
// tokens the VNNI kernels measured faster).
constexpr int64_t kAmxInt8Tokens = 64;

}  // namespace

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
// slices every chunk, measured slower.
struct PackedLayout {
  PanelFormat format;
  int64_t cols, panels;
  ColumnSlices slices;

  PackedLayout(PanelFormat f, int64_t rows, int64_t c)
      : format(f), cols(c), panels(panel_count(rows)), slices(column_slices(f, c)) {}
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

int64_t MatmulJob::acts_blocks(std::span<const MatmulTarget> targets, int64_t n_tokens) {
  for (const MatmulTarget& t : targets)
    if (is_quantized(panel_format(t.w->type))) return n_tokens * (targets[0].w->cols / kQBlock);
  return 0;
}

// The work is handed out in chunks, each thread starting on its own
// contiguous share of them (Team::share_ranges): one long stream per
// thread, and a thread the OS deschedules (cores shared with other work)
// delays the call by at most one claim. Decode's chunks are single panels,
// claimed a tile at a time and in shrinking ranges at the end of a share,
// so the threads finish a step close together. A chunk is a run of
// panels times a block of tokens, the chunks of one run of panels in a row,
// so a thread's share goes run after run, each run's weights staying in L2
// while the token blocks pass over them. Splitting the tokens keeps chunks
// small enough to share out evenly however many tokens there are, while
// runs of 8 panels read the activations from L3 half as often as runs of
// 4.
std::atomic<uint64_t> MatmulJob::next_serial_{1};

MatmulJob::MatmulJob(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, Q8Act* acts,
                     int64_t n_prompt, uint8_t* prompt_acts)
    : n_tokens_(n_tokens), x_(x), serial_(next_serial_.fetch_add(1, std::memory_order_relaxed)) {
  if (targets.size() > static_cast<size_t>(kMaxTargets))
    throw Error("matmul: at most " + std::to_string(kMaxTargets) + " targets may share an input");
  if (n_prompt < 0 || n_prompt > n_tokens) throw Error("matmul: prompt tokens outside [0, n_tokens]");
  if (targets.empty() || n_tokens <= 0) return;
  kernels_ = active_kernels().matmul;
  prefetch_ = prefetch_weights();
  nta_ = prefetch_non_temporal();
  cols_ = targets[0].w->cols;
  bool any_quantized = false, one_type = true;
  for (const MatmulTarget& t : targets) {
    check_shape(*t.w);
    if (t.w->cols != cols_) throw Error("matmul: targets sharing an input must have the same number of columns");
    any_quantized |= is_quantized(panel_format(t.w->type));
    one_type &= t.w->type == targets[0].w->type;
  }
  const PromptPath path = one_type ? kernels::prompt_path(targets[0].w->type) : PromptPath::none;
  if (any_quantized) {
    if (acts == nullptr) throw Error("matmul: quantized weights need an activation buffer");
    acts_ = acts;
  }
  if (n_prompt > 0 && path != PromptPath::none && cols_ % kQBlock == 0) {
    if (prompt_acts == nullptr) throw Error("matmul: prompt tokens need a prompt activation buffer");
    prompt_path_ = path;
    n_prompt_ = n_prompt;
    prompt_acts_ = prompt_acts;
  }
  const int64_t n_int8 = n_tokens_ - n_prompt_;
  int8_tiles_ = any_quantized && n_int8 >= kAmxInt8Tokens && use_amx();
  chunk_panels_ = n_prompt_ > 0 || int8_tiles_ ? kAmxChunkPanels : n_tokens > kActGroup ? kPrefillChunkPanels : 1;
  for (const MatmulTarget& t : targets) {
    if (t.w->rows == 0) continue;
    targets_[n_targets_++] = {t.w, t.y, n_runs_};
    n_runs_ += (panel_count(t.w->rows) + chunk_panels_ - 1) / chunk_panels_;
  }
  // Tokens per chunk: as many as fit kActivationBlockBytes, whole groups
  // of activations (matmul.h), or whole 2-group tiles for the AMX paths.
  const int64_t token_bytes = std::max<int64_t>(acts_ ? cols_ / kQBlock * int64_t{sizeof(Q8Act)} : 0, cols_ * 4);
  const int64_t token_step = int8_tiles_ ? kAmxTileTokens : kActGroup;
  token_block_ = std::max(token_step, kActivationBlockBytes / token_bytes / token_step * token_step);
  token_blocks_ = (n_int8 + token_block_ - 1) / token_block_;
  // The AMX-BF16 path's blocks are whole 2-group tiles, the int16 path's
  // whole groups.
  if (n_prompt_ > 0) {
    const bool amx_bf16 = prompt_path_ == PromptPath::amx_bf16;
    const int64_t prompt_token_bytes = amx_bf16 ? cols_ * 2 * 2 : cols_ / kQBlock * int16::kBlockBytes / 16;
    const int64_t prompt_step = amx_bf16 ? kAmxTileTokens : kActGroup;
    prompt_block_ = std::max(prompt_step, kActivationBlockBytes / prompt_token_bytes / prompt_step * prompt_step);
    prompt_blocks_ = (n_prompt_ + prompt_block_ - 1) / prompt_block_;
  }
}

void MatmulJob::prepare_row(int64_t t) const {
  const int64_t nb = cols_ / kQBlock, n_int8 = n_tokens_ - n_prompt_;
  if (t < n_prompt_ && prompt_path_ == PromptPath::amx_bf16)
    amx::row_to_bf16(x_ + t * cols_, cols_, reinterpret_cast<uint16_t*>(prompt_acts_) + bf16_act_index(t, 0, nb));
  else if (t < n_prompt_)
    int16::quantize_row(x_ + t * cols_, cols_, prompt_acts_ + t / 16 * nb * int16::kBlockBytes,
                        static_cast<int>(t % 16));
  else if (acts_)
    kernels_->quantize(x_ + t * cols_, cols_, acts_ + act_index(t - n_prompt_, 0, n_int8, nb),
                       act_group_width(t - n_prompt_, n_int8));
}

std::pair<const MatmulJob::Target*, int64_t> MatmulJob::locate(int64_t r) const {
  int i = 0;
  while (i + 1 < n_targets_ && targets_[i + 1].first_run <= r) ++i;
  return {&targets_[i], (r - targets_[i].first_run) * chunk_panels_};
}

namespace {

// Where the kernels find slice s of a chunk's panels [p0, p0 + n): at
// base + offset(s), one panel after another, stride(s) bytes apart; in the
// prepared weights (tiles, PackedLayout::offset) or in a scratch buffer of
// the thread's (one slice after another).
struct ChunkPanels {
  PackedLayout layout;
  const uint8_t* base;
  bool prepared;
  int64_t p0, n;
  size_t offset(int64_t s) const { return prepared ? layout.offset(p0, s) : n * s * layout.slice_panel_bytes(0); }
  size_t stride(int64_t s) const { return layout.slice_panel_bytes(s); }
  // Slice s of panel p0 + i, in bytes from base.
  size_t at(int64_t s, int64_t i) const { return offset(s) + i * stride(s); }
  size_t scratch_bytes() const { return n * layout.whole_panel_bytes(); }
  // fn(slice s of panel p0 + i, its columns, i, s) for every panel and
  // slice, slice after slice: how a chunk's panels are copied or unpacked
  // into a thread's scratch.
  template <class F>
  void each_slice_panel(F&& fn) const {
    for (int64_t s = 0; s < layout.slices.count; ++s)
      for (int64_t i = 0; i < n; ++i) fn(base + at(s, i), layout.slices.cols(s, layout.cols), i, s);
  }
};

// Scratch for a thread's chunk panels, 64-byte aligned. Grows, never shrinks.
uint8_t* chunk_scratch(std::vector<CacheLine>& buf, const ChunkPanels& c) {
  return scratch(buf, c.scratch_bytes() / 64)->bytes;
}

// Panels packed, widened or unpacked by a run go to the thread's scratch,
// once per run: the run's next chunks, which the thread most often takes
// next, find them there. `derived` holds the widened f32 panels of a float
// run or the tiles of its prompt path or of AMX-INT8 (an f16 or bf16 run
// can have chunks of both), keyed apart.
struct RunScratch {
  // (job, run; 2 run + tiles for derived)
  std::pair<uint64_t, int64_t> packed_for{0, -1}, derived_for{0, -1}, whole_for{0, -1};
  std::vector<CacheLine> packed, derived, whole;
};

// A tile path's unpacking of one slice panel: unpack(format, slice panel,
// its columns, its first record).
using Unpack = void (*)(PanelFormat, const uint8_t*, int64_t, uint8_t*);

}  // namespace

// One run_panels call: panels [p0, p1) of one target, all their column
// slices, times the job's tokens [t_begin, t_end), and one function per
// path those tokens and panels may take.
struct MatmulJob::Run {
  const MatmulJob& job;
  const Matrix& w;
  float* y;  // the target's
  int64_t p0, p1, t_begin, t_end;
  PanelFormat format;
  PackedLayout layout;
  bool quantized;
  int64_t nb;        // activation blocks per token
  int last_rows;     // valid rows of panel p1 - 1
  int64_t tile_tokens;  // tokens from t_begin on that take the AMX-INT8 tiles
  ChunkPanels panels;
  RunScratch& own;
  std::pair<uint64_t, int64_t> key, derived_key;  // own.packed_for and whole_for; own.derived_for
  bool fresh;  // own.derived holds another run's panels

  float* y_at(int64_t t) const { return y + t * w.rows + p0 * kPanelRows; }
  // Unprepared weights: the run's panels packed from the GGUF rows.
  void pack();
  // The run's panels as a tile path's records of block_bytes per panel and
  // block, panel i's block b at i * nb + b (every slice's blocks in order).
  const uint8_t* unpacked(int64_t block_bytes, Unpack unpack) const;
  // The panel kernels' arguments for tokens [t0, t0 + n); t0 starts a group
  // of the int8 tokens (token_block_ is a multiple of kActGroup), and the
  // groups before it are full.
  PanelArgs args(int64_t t0, int64_t n) const;

  // The prompt paths (PromptPath).
  void prompt_amx_bf16() const;
  void prompt_int16() const;
  // Quantized weights' first tile_tokens tokens.
  void amx_int8() const;
  // Many tokens over f16 / bf16 weights: widened to f32 once per run, for
  // the f32 kernel to reuse across all the tokens (see kWidenTokens). The
  // float formats slice alike (panel.h: slice_cols), so slice s is slice s.
  void widened_f32() const;
  // Prefill's tiles of tokens over a sliced quantized matrix without the
  // AMX tiles: the run's panels gathered whole once (a panel's slices end to
  // end are its packing over all the columns) and taken in one call. Slice
  // by slice, every call would load and store its tokens' sums, rows of y
  // w.rows floats apart, which for many rows fall into one L1 set.
  void whole_panels() const;
  // The tokens after tile_tokens, slice after slice, each slice's sums
  // going on from the last one's. Widened panels are in L2 already: no
  // prefetching them.
  void slice_by_slice() const;
};

void MatmulJob::run_chunk(int64_t c) const {
  const int64_t blocks_per_run = prompt_blocks_ + token_blocks_;
  const auto [t, p0] = locate(c / blocks_per_run);
  run_panels(t, p0, std::min(panel_count(t->w->rows), p0 + chunk_panels_), c % blocks_per_run);
}

int64_t MatmulJob::tile_chunks() const {
  return prompt_blocks_ + token_blocks_ == 1 ? kTilePanels / chunk_panels_ : 1;
}

void MatmulJob::run(Team& team) const {
  team.share_ranges(chunks(), tile_chunks(), [&](int64_t c0, int64_t c1) { run_chunks(c0, c1); });
}

// Consecutive runs of one block of tokens each, within a tile and a target,
// are one stream: one kernel call per column slice takes them all.
void MatmulJob::run_chunks(int64_t c0, int64_t c1) const {
  if (prompt_blocks_ + token_blocks_ > 1) {
    for (int64_t c = c0; c < c1; ++c) run_chunk(c);
    return;
  }
  while (c0 < c1) {
    const auto [t, p0] = locate(c0);
    const int64_t tile_end = (p0 / kTilePanels + 1) * kTilePanels;
    const int64_t p1 = std::min({panel_count(t->w->rows), tile_end, p0 + (c1 - c0) * chunk_panels_});
    run_panels(t, p0, p1, 0);
    c0 += (p1 - p0 + chunk_panels_ - 1) / chunk_panels_;
  }
}

// Panels [p0, p1) of one target, all their column slices, times one block
// of tokens.
void MatmulJob::run_panels(const Target* t, int64_t p0, int64_t p1, int64_t block) const {
  const int64_t run = t->first_run + p0 / chunk_panels_;
  const bool prompt = block < prompt_blocks_;
  // Token indices of the job; the int8 tokens' activations count from n_prompt_.
  const int64_t t_begin = prompt ? block * prompt_block_ : n_prompt_ + (block - prompt_blocks_) * token_block_;
  const int64_t t_end = std::min(prompt ? n_prompt_ : n_tokens_, t_begin + (prompt ? prompt_block_ : token_block_));
  const Matrix& w = *t->w;
  const PanelFormat format = panel_format(w.type);
  const PackedLayout layout(format, w.rows, cols_);
  const bool quantized = is_quantized(format);
  // Quantized runs' whole groups of tokens go through the AMX-INT8 tiles,
  // the rest (the job's last group, when not whole) through the panel
  // kernels: the same bits either way (matmul.h).
  const int64_t tile_tokens = int8_tiles_ && quantized ? (t_end - t_begin) / kActGroup * kActGroup : 0;
  thread_local RunScratch own;
  const std::pair<uint64_t, int64_t> key{serial_, run}, derived_key{serial_, 2 * run + (prompt || tile_tokens > 0)};
  Run r{*this, w, t->y, p0, p1, t_begin, t_end, format, layout, quantized, cols_ / kQBlock,
        static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - (p1 - 1) * kPanelRows)), tile_tokens,
        {layout, has_own_panel_format(w.type) ? w.packed : nullptr, true, p0, p1 - p0},
        own, key, derived_key, own.derived_for != derived_key};
  if (!r.panels.base) r.pack();

  if (prompt) return prompt_path_ == PromptPath::amx_bf16 ? r.prompt_amx_bf16() : r.prompt_int16();
  if (tile_tokens > 0) {
    r.amx_int8();
    if (tile_tokens == t_end - t_begin) return;
  }
  if (kernels_->widen && n_tokens_ >= kWidenTokens && (format == PanelFormat::f16 || format == PanelFormat::bf16))
    return r.widened_f32();
  if (quantized && n_tokens_ > kActGroup && tile_tokens == 0 && layout.slices.count > 1) return r.whole_panels();
  r.slice_by_slice();
}

void MatmulJob::Run::pack() {
  panels.prepared = false;
  uint8_t* packed = chunk_scratch(own.packed, panels);
  for (int64_t s = 0; own.packed_for != key && s < layout.slices.count; ++s) {
    const Matrix slice = column_slice(w, layout.slices, s);
    for (int64_t q = p0; q < p1; ++q) pack_panel(slice, q, packed + panels.at(s, q - p0));
  }
  own.packed_for = key;
  panels.base = packed;
}

const uint8_t* MatmulJob::Run::unpacked(int64_t block_bytes, Unpack unpack) const {
  uint8_t* out = scratch(own.derived, panels.n * nb * block_bytes / 64)->bytes;
  if (fresh)
    panels.each_slice_panel([&](const uint8_t* p, int64_t cols, int64_t i, int64_t s) {
      unpack(format, p, cols, out + (i * nb + s * layout.slices.width / kQBlock) * block_bytes);
    });
  own.derived_for = derived_key;
  return out;
}

PanelArgs MatmulJob::Run::args(int64_t t0, int64_t n) const {
  PanelArgs a{};
  a.n_panels = panels.n;
  a.x_stride = quantized ? nb : job.cols_;
  a.y_stride = w.rows;
  a.rows = last_rows;
  a.n_tokens = n;
  a.y = y_at(t0);
  a.x = quantized ? static_cast<const void*>(job.acts_ + (t0 - job.n_prompt_) * nb)
                  : static_cast<const void*>(job.x_ + t0 * job.cols_);
  return a;
}

void MatmulJob::Run::prompt_amx_bf16() const {
  const int w_parts = amx::bf16_weight_parts(format);
  const auto* tiles = reinterpret_cast<const uint16_t*>(
      unpacked(w_parts * kBf16TileValues * 2, [](PanelFormat f, const uint8_t* p, int64_t cols, uint8_t* to) {
        amx::split_bf16(f, p, cols, reinterpret_cast<uint16_t*>(to));
      }));
  const uint16_t* x = reinterpret_cast<const uint16_t*>(job.prompt_acts_) + bf16_act_index(t_begin, 0, nb);
  amx::bf16_panels({tiles, panels.n, nb, x, t_end - t_begin, y_at(t_begin), w.rows, last_rows, w_parts});
}

void MatmulJob::Run::prompt_int16() const {
  const uint8_t* records = unpacked(int16::kBlockBytes, int16::unpack);
  int16::panels({records, panels.n, nb, job.prompt_acts_ + t_begin / 16 * nb * int16::kBlockBytes, t_end - t_begin,
                 y_at(t_begin), w.rows, last_rows});
}

void MatmulJob::Run::amx_int8() const {
  // All the slices in one call: their sums are one pass's (PanelArgs::resume).
  PanelArgs a = args(t_begin, tile_tokens);
  a.panel = unpacked(amx::kInt8BlockBytes, amx::unpack_int8);
  a.panel_stride = nb * amx::kInt8BlockBytes;
  a.cols = job.cols_;
  amx::int8_panels(format, a);
}

void MatmulJob::Run::widened_f32() const {
  Run wide = *this;
  wide.panels = {PackedLayout(PanelFormat::f32, w.rows, job.cols_), nullptr, false, p0, p1 - p0};
  uint8_t* out = chunk_scratch(own.derived, wide.panels);
  if (fresh)
    panels.each_slice_panel([&](const uint8_t* p, int64_t cols, int64_t i, int64_t s) {
      job.kernels_->widen(format, p, cols, reinterpret_cast<float*>(out + wide.panels.at(s, i)));
    });
  own.derived_for = derived_key;
  wide.panels.base = out;
  wide.slice_by_slice();
}

void MatmulJob::Run::whole_panels() const {
  const size_t whole_bytes = layout.whole_panel_bytes();
  uint8_t* whole = scratch(own.whole, panels.n * whole_bytes / 64)->bytes;
  if (own.whole_for != key)
    panels.each_slice_panel([&](const uint8_t* p, int64_t, int64_t i, int64_t s) {
      std::memcpy(whole + i * whole_bytes + s * layout.slice_panel_bytes(0), p, panels.stride(s));
    });
  own.whole_for = key;
  PanelArgs a = args(t_begin, t_end - t_begin);
  a.cols = job.cols_;
  a.panel = whole;
  a.panel_stride = whole_bytes;
  job.kernels_->panel[job.prefetch_][job.nta_][static_cast<int>(format)](a);
}

void MatmulJob::Run::slice_by_slice() const {
  const bool widened = panels.layout.format != format;
  const PanelKernel kernel =
      job.kernels_->panel[job.prefetch_ && !widened][job.nta_][static_cast<int>(panels.layout.format)];
  const int64_t t0 = t_begin + tile_tokens;
  PanelArgs a = args(t0, t_end - t0);
  const void* x0 = a.x;
  for (int64_t s = 0; s < layout.slices.count; ++s) {
    const int64_t c0 = s * layout.slices.width;
    a.cols = layout.slices.cols(s, job.cols_);
    a.resume = s > 0;
    if (quantized) a.x_block0 = c0 / kQBlock;  // act_row finds the slice's blocks
    else a.x = static_cast<const float*>(x0) + c0;
    a.panel = panels.base + panels.offset(s);
    a.panel_stride = panels.stride(s);
    kernel(a);
  }
}

void matmul(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool,
            int64_t n_prompt) {
  if (targets.empty() || n_tokens <= 0) return;
  thread_local std::vector<Q8Act> acts_buf;  // the caller's: workers use it through the job
  thread_local std::vector<CacheLine> prompt_buf;
  const size_t prompt_lines = n_prompt > 0 ? prompt_acts_bytes(n_prompt, targets[0].w->cols) / 64 : 0;
  const MatmulJob job(targets, x, n_tokens, scratch(acts_buf, MatmulJob::acts_blocks(targets, n_tokens)), n_prompt,
                      prompt_lines > 0 ? scratch(prompt_buf, prompt_lines)->bytes : nullptr);
  if (job.chunks() == 0) return;
  pool.run_team([&](Team& team) {
    team.share(n_tokens, [&](int64_t t) { job.prepare_row(t); });
    job.run(team);
  });
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, int64_t n_prompt) {
  const MatmulTarget target{&w, y};
  matmul(std::span<const MatmulTarget>(&target, 1), x, n_tokens, pool, n_prompt);
}

PromptPath prompt_path(gguf::TensorType type) {
  if (amx::bf16_weight_parts(panel_format(type)) == 0) return PromptPath::none;
  if (use_amx()) return PromptPath::amx_bf16;
  return active_isa() == Isa::avx512 ? PromptPath::int16 : PromptPath::none;
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
