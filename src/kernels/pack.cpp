// GGUF rows -> panels (layouts in panel.h). Runs at load time (prepare) and,
// for unprepared matrices, once per panel per matmul call.
#include <cstring>
#include <vector>

#include "core/error.h"
#include "gguf/quant.h"
#include "kernels/panel.h"

namespace llmserve::kernels {

namespace {

using gguf::TensorType;
constexpr int R = kPanelRows;

// Rows of the panel in the source, null for the zero padding.
struct Rows {
  const uint8_t* row[R];
  Rows(const Matrix& w, int64_t p) {
    for (int r = 0; r < R; ++r) {
      const int64_t i = p * R + r;
      row[r] = i < w.rows ? w.data + static_cast<size_t>(i) * w.row_bytes : nullptr;
    }
  }
};

// Scatters 32 codes of row r into a block's group vectors (low nibble /
// high nibble halves for the 4-bit layouts).
void put_codes8(uint8_t* block, int r, const uint8_t* codes) {
  for (int j = 0; j < 8; ++j) std::memcpy(block + j * 64 + r * 4, codes + 4 * j, 4);
}
void put_nibbles(uint8_t* block, int r, const uint8_t* codes) {
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i)
      block[j * 64 + r * 4 + i] = static_cast<uint8_t>((codes[4 * j + i] & 15) | (codes[16 + 4 * j + i] & 15) << 4);
}

void pack_q8_0(const Rows& src, int64_t nb, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    if (!src.row[r]) continue;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = src.row[r] + b * sizeof(gguf::BlockQ8_0);
      uint8_t codes[32];
      for (int i = 0; i < 32; ++i) codes[i] = blk[2 + i] ^ 0x80;
      put_codes8(dst + kQ8_0Layout.codes(b), r, codes);
      std::memcpy(dst + kQ8_0Layout.meta(b) + r * 2, blk, 2);
    }
  }
}

void pack_q4_0(const Rows& src, int64_t nb, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    if (!src.row[r]) continue;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = src.row[r] + b * sizeof(gguf::BlockQ4_0);
      for (int j = 0; j < 4; ++j) std::memcpy(dst + kQ4_0Layout.codes(b) + j * 64 + r * 4, blk + 2 + 4 * j, 4);
      std::memcpy(dst + kQ4_0Layout.meta(b) + r * 2, blk, 2);
    }
  }
}

// Q4_K's 6-bit scale and min of sub-block j from the 12 packed bytes.
void q4k_scale_min(const uint8_t* q, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 15) | (q[j - 4] >> 6) << 4);
    m = static_cast<uint8_t>((q[j + 4] >> 4) | (q[j] >> 6) << 4);
  }
}

void pack_q4_k(const Rows& src, int64_t nsb, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    if (!src.row[r]) continue;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* blk = src.row[r] + s * sizeof(gguf::BlockQ4_K);
      const uint8_t* qs = blk + offsetof(gguf::BlockQ4_K, qs);
      uint8_t* m = dst + kQ4_KLayout.meta(8 * s);
      std::memcpy(m + r * 2, blk + offsetof(gguf::BlockQ4_K, d), 2);
      std::memcpy(m + kQ4_KDmin + r * 2, blk + offsetof(gguf::BlockQ4_K, dmin), 2);
      for (int c = 0; c < 8; ++c) {
        q4k_scale_min(blk + offsetof(gguf::BlockQ4_K, scales), c, m[kQ4_KSc + c * R + r], m[kQ4_KM + c * R + r]);
        // Block c's 32 values are the low (c even) or high nibbles of 32 bytes.
        uint8_t codes[32];
        for (int i = 0; i < 32; ++i) codes[i] = static_cast<uint8_t>(qs[32 * (c / 2) + i] >> (4 * (c & 1)));
        put_nibbles(dst + kQ4_KLayout.codes(8 * s + c), r, codes);
      }
    }
  }
}

// The 6-bit code of element e (0..255) of a Q6_K super-block.
uint8_t q6k_code(const uint8_t* ql, const uint8_t* qh, int e) {
  const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t lo = ql[64 * half + l + 32 * (quarter & 1)] >> (4 * (quarter >> 1));
  const uint8_t hi = qh[32 * half + l] >> (2 * quarter);
  return static_cast<uint8_t>((lo & 15) | (hi & 3) << 4);
}

void pack_q6_k(const Rows& src, int64_t nsb, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    if (!src.row[r]) continue;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* blk = src.row[r] + s * sizeof(gguf::BlockQ6_K);
      const uint8_t* ql = blk + offsetof(gguf::BlockQ6_K, ql);
      const uint8_t* qh = blk + offsetof(gguf::BlockQ6_K, qh);
      uint8_t* m = dst + kQ6_KLayout.meta(8 * s);
      std::memcpy(m + r * 2, blk + offsetof(gguf::BlockQ6_K, d), 2);
      for (int k = 0; k < 16; ++k) m[kQ6_KSc + k * R + r] = blk[offsetof(gguf::BlockQ6_K, scales) + k];
      for (int c = 0; c < 8; ++c) {
        uint8_t codes[32];
        for (int i = 0; i < 32; ++i) codes[i] = q6k_code(ql, qh, 32 * c + i);
        uint8_t* out = dst + kQ6_KLayout.codes(8 * s + c);
        put_nibbles(out, r, codes);
        for (int h = 0; h < 2; ++h)
          for (int i = 0; i < 4; ++i) {
            uint8_t bits = 0;
            for (int g = 0; g < 4; ++g) bits |= static_cast<uint8_t>((codes[4 * (4 * h + g) + i] >> 4) << (2 * g));
            out[256 + h * 64 + r * 4 + i] = bits;
          }
      }
    }
  }
}

// Float formats: transposes `elem`-byte values to [cols][16].
void pack_float(const Rows& src, int64_t cols, size_t elem, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    if (!src.row[r]) continue;
    for (int64_t c = 0; c < cols; ++c) std::memcpy(dst + (c * R + r) * elem, src.row[r] + c * elem, elem);
  }
}

// Types without a panel kernel: dequantize with the reference conversion.
void pack_dequantized(const Matrix& w, int64_t p, uint8_t* dst) {
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(w.cols));
  for (int r = 0; r < R; ++r) {
    const int64_t i = p * R + r;
    if (i >= w.rows) continue;
    gguf::dequantize_row(w.type, w.data + static_cast<size_t>(i) * w.row_bytes, row.data(), w.cols);
    for (int64_t c = 0; c < w.cols; ++c) std::memcpy(dst + (c * R + r) * 4, &row[c], 4);
  }
}

}  // namespace

bool has_own_panel_format(TensorType type) {
  switch (type) {
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q4_K: case TensorType::Q6_K:
    case TensorType::F32: case TensorType::F16: case TensorType::BF16:
      return true;
    default:
      return false;
  }
}

PanelFormat panel_format(TensorType type) {
  switch (type) {
    case TensorType::Q8_0: return PanelFormat::q8_0;
    case TensorType::Q4_0: return PanelFormat::q4_0;
    case TensorType::Q4_K: return PanelFormat::q4_k;
    case TensorType::Q6_K: return PanelFormat::q6_k;
    case TensorType::F32: return PanelFormat::f32;
    case TensorType::F16: return PanelFormat::f16;
    case TensorType::BF16: return PanelFormat::bf16;
    case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1: case TensorType::Q5_K:
      return PanelFormat::f32;
    default: {
      const auto info = gguf::type_info(type);
      throw Error("matmul: weight type " + std::string(info ? info->name : "id " + std::to_string(static_cast<int>(type))) +
                  " is not supported");
    }
  }
}

size_t panel_bytes(PanelFormat format, int64_t cols) {
  const auto n = static_cast<size_t>(cols);
  size_t bytes = 0;
  switch (format) {
    case PanelFormat::q8_0: bytes = kQ8_0Layout.panel_bytes(cols / 32); break;
    case PanelFormat::q4_0: bytes = kQ4_0Layout.panel_bytes(cols / 32); break;
    case PanelFormat::q4_k: bytes = kQ4_KLayout.panel_bytes(cols / 32); break;
    case PanelFormat::q6_k: bytes = kQ6_KLayout.panel_bytes(cols / 32); break;
    case PanelFormat::f32: bytes = n * R * 4; break;
    case PanelFormat::f16: case PanelFormat::bf16: bytes = n * R * 2; break;
    case PanelFormat::count: break;
  }
  return (bytes + 63) / 64 * 64;
}

void pack_panel(const Matrix& w, int64_t p, uint8_t* dst) {
  const PanelFormat format = panel_format(w.type);
  // Padding rows, and the zero blocks that fill up a last group (panel.h:
  // kGroupCols).
  if ((p + 1) * R > w.rows || (is_quantized(format) && w.cols % kGroupCols != 0))
    std::memset(dst, 0, panel_bytes(format, w.cols));
  if (!has_own_panel_format(w.type)) return pack_dequantized(w, p, dst);
  const Rows src(w, p);
  switch (format) {
    case PanelFormat::q8_0: return pack_q8_0(src, w.cols / 32, dst);
    case PanelFormat::q4_0: return pack_q4_0(src, w.cols / 32, dst);
    case PanelFormat::q4_k: return pack_q4_k(src, w.cols / 256, dst);
    case PanelFormat::q6_k: return pack_q6_k(src, w.cols / 256, dst);
    case PanelFormat::f32: return pack_float(src, w.cols, 4, dst);
    case PanelFormat::f16: case PanelFormat::bf16: return pack_float(src, w.cols, 2, dst);
    case PanelFormat::count: break;
  }
}

}  // namespace llmserve::kernels
