#pragma once
// Internal: the panel layout that prepare() produces and the per-ISA matmul
// kernels consume, and the table each ISA's kernels fill in.
//
// A panel is 16 consecutive weight rows (the last panel is zero-padded). The
// 16 rows sit in the 16 lanes of a vector, so one instruction works on 16
// rows at once and no horizontal sums are needed:
//
// Quantized formats (per 32 columns a "block"; K-quants group 8 blocks into
// a 256-column super-block). Codes are unsigned bytes; a weight is
//   w = S * code - M   with per-row, per-block S and M (Q6_K: per 16 columns).
//   For column group j (columns 4j..4j+3 of a block), one 64-byte vector
//   holds byte [r*4 + i] = code of row r, column 4j+i: exactly the operand
//   vpdpbusd multiplies with 4 broadcast activation bytes.
// A panel is one stream of groups, each the codes and scales of a few
// blocks, 64-byte aligned (QuantLayout below), so decode reads it front to
// back with nothing else in flight. Every format puts the scales first: the
// kernels load a block's scales along with its codes, and scales after the
// codes made that one load jump ahead of the stream the prefetchers follow,
// which measured slower.
//   q8_0: group = 8 blocks: f16 d[8][16], then codes [8][8 groups][64] =
//         qs ^ 0x80                                       (S = d, M = 128 d)
//   q4_0: group = 8 blocks: f16 d[8][16], then codes [8][4][64], byte = the
//         original qs byte (low nibble: group j < 4, high nibble: group j + 4)
//                                                          (S = d, M = 8 d)
//   q4_k: group = 1 super-block: f16 d[16], f16 dmin[16], u8 sc[8][16],
//         u8 m[8][16], then codes [8 blocks][4][64] nibbles as q4_0
//                                                   (S = d sc, M = dmin m)
//   q6_k: group = 1 super-block: f16 d[16], i8 sc[16 sub-blocks of 16
//         columns][16], 32 bytes padding, then codes [8 blocks][6][64]: 4
//         nibble vectors as q4_0, then 2 vectors of the top 2 bits (vector
//         h, bits 2s..2s+1 of byte r*4+i belong to group 4h+s)
//                                                   (S = d sc, M = 32 S)
// Every format's group is 8 blocks (256 columns); a q8_0 / q4_0 panel's
// last group is filled up with zero blocks. Groups of 8 blocks, together
// with every quantized format prefetching its lines (matmul_avx512.cpp:
// prefetch), stream faster than the 2-block groups Q8_0 and Q4_0 once had,
// though the arithmetic is the same.
// Float formats: [cols][16] values (f32, f16 or bf16 bits).
// Other GGUF types are dequantized into f32 panels when used.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"

namespace llmserve::kernels {

constexpr int kPanelRows = 16;

enum class PanelFormat : int { q8_0, q4_0, q4_k, q6_k, f32, f16, bf16, count };

inline bool is_quantized(PanelFormat f) { return f <= PanelFormat::q6_k; }

// Where block b's codes and scales sit in a quantized panel.
struct QuantLayout {
  int64_t group_blocks;  // blocks per group
  int64_t group_bytes;   // 64-byte multiple
  int64_t code_bytes;    // per block
  int64_t codes_offset;  // from the group's start
  int64_t meta_offset;   // scales, from the group's start
  int64_t meta_stride;   // per block within the group (0: one record per group)

  constexpr int64_t codes(int64_t b) const {
    return b / group_blocks * group_bytes + codes_offset + b % group_blocks * code_bytes;
  }
  constexpr int64_t meta(int64_t b) const {
    return b / group_blocks * group_bytes + meta_offset + b % group_blocks * meta_stride;
  }
  constexpr int64_t panel_bytes(int64_t nb) const { return (nb + group_blocks - 1) / group_blocks * group_bytes; }
  // A group's scale bytes: all of it but the codes.
  constexpr int64_t meta_bytes() const { return group_bytes - group_blocks * code_bytes; }
};
constexpr QuantLayout kQ8_0Layout{8, 4352, 512, 256, 0, 32};
constexpr QuantLayout kQ4_0Layout{8, 2304, 256, 256, 0, 32};
constexpr QuantLayout kQ4_KLayout{8, 2368, 256, 320, 0, 0};
constexpr QuantLayout kQ6_KLayout{8, 3392, 384, 320, 0, 0};
// Columns of a group, the same for every quantized format: column slices
// (below) are whole groups, and a panel whose columns are no multiple of
// it ends in a group filled up with zero blocks (pack_panel).
constexpr int64_t kGroupCols = 256;
static_assert(kQ8_0Layout.group_blocks * kQBlock == kGroupCols && kQ4_0Layout.group_blocks * kQBlock == kGroupCols &&
              kQ4_KLayout.group_blocks * kQBlock == kGroupCols && kQ6_KLayout.group_blocks * kQBlock == kGroupCols);
// Offsets inside a K-quant group's scale record.
constexpr int64_t kQ4_KDmin = 32, kQ4_KSc = 64, kQ4_KM = 192;
constexpr int64_t kQ6_KSc = 32;

// The format matmul uses for `type`: its own, or f32 for types without a
// panel kernel. Throws Error for types matmul does not support.
PanelFormat panel_format(gguf::TensorType type);
bool has_own_panel_format(gguf::TensorType type);

// Bytes of one panel for `cols` columns, a multiple of 64.
size_t panel_bytes(PanelFormat format, int64_t cols);
inline int64_t panel_count(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }

// A matrix wider than its format's slice_cols() is packed as column
// slices: decode multiplies slice 0 of a run of panels with slice 0 of the
// activations, then slice 1, and so on, so a slice's activation lines are
// used again a few KB of weights later, before the weight stream pushes
// them out of L1: a whole 16-row panel of a 5632-column matrix at 4.5 bits
// a weight (50 KB) outgrows a 48 KB L1 before the next panel comes to use
// them. Each slice's sums go on from the sums the
// slices before it left in y (PanelArgs::resume), so for the quantized
// formats, which sum a token in one chain, the slices are a memory layout
// only: the results are those of one pass over all the columns
// (MatmulSlices.QuantizedSumsGoOnAcrossSlices), and prefill takes a run's
// slices together in one call (the AMX tiles unpack them into one record;
// the VNNI tiles of tokens get the panels gathered whole, matmul.cpp).
// The float kernels' two chains per token make a slice boundary a
// rounding of their own. matmul.cpp's PackedLayout says
// where each slice of each panel sits. Every slice but the last is `width`
// columns, a multiple of kGroupCols (whole groups).
// The K-quants' slices keep about 9-14 KB of a panel between two uses of an
// activation line; narrower, and a kernel call's setup and each slice's
// load and store of its sums start to show. The float formats measured
// slower in narrower slices than 2048 columns, and Q8_0 and Q4_0, in
// 8-block groups, faster whole.
inline int64_t slice_cols(PanelFormat format) {
  switch (format) {
    case PanelFormat::q8_0:
    case PanelFormat::q4_0: return 8192;
    case PanelFormat::q4_k:
    case PanelFormat::q6_k: return 1024;
    default: return 2048;
  }
}
struct ColumnSlices {
  int64_t count, width;
  int64_t cols(int64_t s, int64_t total) const { return std::min(width, total - s * width); }
};
inline ColumnSlices column_slices(PanelFormat format, int64_t cols) {
  const int64_t max_width = slice_cols(format);
  if (cols <= max_width) return {1, cols};
  const int64_t n = (cols + max_width - 1) / max_width;
  const int64_t width = ((cols + n - 1) / n + kGroupCols - 1) / kGroupCols * kGroupCols;
  return {(cols + width - 1) / width, width};
}

// Writes rows [16 p, 16 p + 16) of w (from w.data) to dst in
// panel_format(w.type)'s layout. dst: panel_bytes(), 64-byte aligned.
void pack_panel(const Matrix& w, int64_t p, uint8_t* dst);

// One kernel call: a run of consecutive panels (one column slice of a
// chunk, see matmul.cpp) times n_tokens activation rows. Panel i of the run
// sits at panel + i * panel_stride and writes rows [16 i, 16 i + 16) of y.
// A run lets a kernel hold several panels in registers at once, so that one
// broadcast activation feeds several of them (the AVX-512 float kernels);
// the others go panel by panel (each_panel).
struct PanelArgs {
  const uint8_t* panel;
  size_t panel_stride;  // bytes from one panel of the run to the next
  int64_t n_panels;     // >= 1
  int64_t cols;
  // Float formats: token t's cols values at x + t * x_stride (floats).
  // Quantized: the call's Q8Act blocks as matmul.h lays them out (act_row
  // says where), its first token starting a group of kActGroup; x_stride
  // blocks per token, this column slice from block x_block0.
  const void* x;
  int64_t x_stride;
  int64_t x_block0;
  int64_t n_tokens;
  float* y;            // y[t * y_stride + 16 i + r] for panel i, r < its rows
  int64_t y_stride;
  int rows;            // valid rows of the run's last panel, 1..16 (the others have 16)
  // Column slices after the first: y holds the sums over the columns before
  // this slice, and the kernel's sums start from them (instead of from 0).
  bool resume;
};

using PanelKernel = void (*)(const PanelArgs& args);
using PanelKernels = std::array<PanelKernel, static_cast<size_t>(PanelFormat::count)>;

// Helpers the per-ISA kernels compile with their own flags: internal
// linkage, so the linker cannot hand one ISA's copy to another's callers.
namespace {

inline int panel_rows(const PanelArgs& run, int64_t i) { return i + 1 == run.n_panels ? run.rows : kPanelRows; }

// Panel i of a run, as a run of one.
inline PanelArgs one_panel(const PanelArgs& run, int64_t i) {
  PanelArgs a = run;
  a.panel += i * run.panel_stride;
  a.y += i * kPanelRows;
  a.rows = panel_rows(run, i);
  a.n_panels = 1;
  return a;
}

// Token t's (of the call) activations for the call's slice: block b at
// x[b * block_stride], and token t + i of t's group at x[i].
struct ActRow {
  const Q8Act* x;
  int64_t block_stride;
};
inline ActRow act_row(const PanelArgs& a, int64_t t) {
  return {static_cast<const Q8Act*>(a.x) + act_index(t, a.x_block0, a.n_tokens, a.x_stride),
          act_group_width(t, a.n_tokens)};
}

// A run, one panel at a time, through a kernel written for one panel.
template <PanelKernel kOnePanel>
void each_panel(const PanelArgs& run) {
  for (int64_t i = 0; i < run.n_panels; ++i) kOnePanel(one_panel(run, i));
}

}  // namespace

struct MatmulKernels {
  // Quantizes one row of `cols` floats (a multiple of 32) to Q8Act blocks,
  // block b at out[b * out_stride]. Every ISA rounds the same way, so
  // results are bit-identical.
  void (*quantize)(const float* x, int64_t cols, Q8Act* out, int64_t out_stride);
  // Writes the f32 panel (PanelFormat::f32's layout) of the same values as
  // an f16 or bf16 panel of `cols` columns, for matmuls of many tokens: the
  // f32 kernel then runs without a conversion per weight vector and token
  // tile (see matmul.cpp). Null where the ISA does not widen.
  void (*widen)(PanelFormat from, const uint8_t* panel, int64_t cols, float* out);
  // Per format: [p][n], p: whether the float formats prefetch their weights
  // in software too (cpu.h: prefetch_weights()), as the quantized ones
  // always do; n: whether that prefetch is non-temporal
  // (prefetch_non_temporal()). Same
  // results every way.
  PanelKernels panel[2][2];
};

// The AMX paths (matmul.h; all of it in matmul_amx.cpp, run only where
// use_amx()).
namespace amx {

// AMX-INT8, quantized weights: a chunk's panels unpacked once (unpack_int8)
// into records of kInt8BlockBytes per panel and block, panel i's block b at
// i * nb + b: the 16 rows' codes as 8 B tile rows of 64 bytes (the code
// vectors above: row j holds columns 4j..4j+3 of the 16 rows, the layout
// vpdpbusd and tdpbssd both take), as signed bytes less their zero point
// (matmul_amx.cpp: unpack_format), then the block's scales in f32, as the
// VNNI kernels make them.
constexpr int64_t kInt8BlockBytes = 11 * 64;
void unpack_int8(PanelFormat format, const uint8_t* panel, int64_t cols, uint8_t* out);
// A run of at most kInt8MaxPanels unpacked panels (args.panel,
// panel_stride nb * kInt8BlockBytes), all their columns in one call (the
// column slices unpacked one after another; args.resume false), times
// args.n_tokens tokens, a multiple of 16 (whole groups of the activations,
// matmul.h): the VNNI kernels' results over the slices, bit for bit.
constexpr int64_t kInt8MaxPanels = 8;
void int8_panels(PanelFormat format, const PanelArgs& args);

// AMX-BF16, f16 and bf16 weights: in how many bf16 parts a weight goes
// (0: the format does not take this path; f32 weights keep the f32 path).
// Activations always go in two, high and low, so the products keep about
// 16 bits where one rounding would keep 8 and a prompt token's matmul stays
// as close to f32 as the f32 path's. f16 weights go in two parts too, which
// hold an f16 value exactly; bf16 weights as they are.
inline int bf16_weight_parts(PanelFormat f) { return f == PanelFormat::f16 ? 2 : f == PanelFormat::bf16 ? 1 : 0; }
// One token's row of `cols` floats as A tile rows, block b's 32 values at
// out + 2 b kBf16TileValues: their bf16 rounding, then kBf16TileValues
// after it the bf16 of the rest.
void row_to_bf16(const float* x, int64_t cols, uint16_t* out);
// One f16 or bf16 panel slice of `cols` columns as B tiles, block b's
// bf16_weight_parts(format) tiles at out + b * parts * kBf16TileValues.
void split_bf16(PanelFormat format, const uint8_t* panel, int64_t cols, uint16_t* out);

// A run of panels in bf16 times a block of bf16 tokens. Block b of panel i
// is w_parts B tiles at w + ((i * nb + b) * w_parts + part) *
// kBf16TileValues: row k (0..15) holds, for each of the 16 weight rows r,
// the pair (w[r][32 b + 2k], w[r][32 b + 2k + 1]). The tokens' activations
// are A tiles as matmul.h lays them out (bf16_act_index). y[t * y_stride +
// 16 i + r] = the f32 sum over all columns, in column order, the same for a
// token whatever tokens share its tile (each tile row is a sum of its own).
struct Bf16Panels {
  const uint16_t* w;
  int64_t n_panels, nb;
  const uint16_t* x;  // the block's first group of 16 tokens
  int64_t n_tokens;   // the block's; its groups are full but for the last
  float* y;
  int64_t y_stride;
  int rows;           // valid rows of the last panel
  int w_parts;
};
void bf16_panels(const Bf16Panels& a);

}  // namespace amx

// The int16 path (matmul.h; all of it in matmul_int16.cpp, run where the
// avx512 level is active and AMX is not): f16 and bf16 weights' prompt
// tokens on vpdpwssd, which multiplies 32 pairs of int16 values per
// instruction where an f32 FMA multiplies 16. Weights and activations go
// per 32-column block to integer codes of at most kMaxCode in magnitude
// and an f32 scale each (per panel row and block for the weights, per
// token and block for the activations): 32 products of two such codes fit
// an int32 (32 x 8191^2 < 2^31), so a block's dot products are exact
// integers, turned into a token's f32 sums once per block.
namespace int16 {

constexpr int kMaxCode = 8191;
static_assert(int64_t{kQBlock} * kMaxCode * kMaxCode <= INT32_MAX);
// A block record, one block of 16 panel rows or of 16 tokens: 16 vectors
// of 64 bytes, then the 16 f32 scales. A panel's vector j holds, for each
// row r, the codes of columns 2j and 2j + 1 at bytes 4r..4r + 3 (the
// operand vpdpwssd takes); the tokens' vector s is token s's 32 codes, in
// column order, so a pair of them is one 32-bit broadcast.
constexpr int64_t kBlockBytes = 17 * 64;
constexpr int64_t kScalesOffset = 16 * 64;
// One f16 or bf16 panel slice of `cols` columns as block records, block b
// at out + b * kBlockBytes.
void unpack(PanelFormat format, const uint8_t* panel, int64_t cols, uint8_t* out);
// A token's row of `cols` floats into its group's block records (block b
// at records + b * kBlockBytes) as token `slot` (0..15) of the group.
void quantize_row(const float* x, int64_t cols, uint8_t* records, int slot);

// A run of unpacked panels times a block of tokens: panel i's block b at
// w + (i * nb + b) * kBlockBytes; the tokens in groups of 16, group g's
// block b a record at x + (g * nb + b) * kBlockBytes, token t its vector
// t % 16. y[t * y_stride + 16 i + r] = the sum over the blocks, in column
// order, of (weight scale x activation scale) x the block's integer sum:
// the same for a token whatever tokens share its tile.
struct Panels {
  const uint8_t* w;
  int64_t n_panels, nb;
  const uint8_t* x;   // the block's first group of 16 tokens
  int64_t n_tokens;   // the block's; its groups are full but for the last
  float* y;
  int64_t y_stride;
  int rows;           // valid rows of the last panel
};
void panels(const Panels& a);

}  // namespace int16

namespace scalar { extern const MatmulKernels kMatmulKernels; }
namespace avx2 { extern const MatmulKernels kMatmulKernels; }
namespace avx512 { extern const MatmulKernels kMatmulKernels; }

}  // namespace llmserve::kernels
