// matmul on every weight type x every ISA path this machine runs, against
// matmul_reference (dequantize + double accumulation).
//
// Tolerances, per output y[t][r], with A = sum_c |w_rc x_tc|:
//  - float weights: |y - ref| <= 2e-5 A (f32 accumulation).
//  - quantized weights, against the reference fed the same int8-rounded
//    activations the kernel uses: |y - ref_q| <= 2e-5 A. This checks the
//    integer kernels exactly, up to float rounding.
//  - quantized, against the exact activations: the rounding bound itself,
//    |y - ref| <= sum_c |w_rc| amax_b / 254 (+ the float slack above), where
//    amax_b is the largest |x| of column c's 32-block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/isa_kernels.h"
#include "kernels/matmul.h"
#include "kernels/panel.h"

namespace llmserve::kernels {
namespace {

using gguf::TensorType;
using llmserve::testing::IsaGuard;
using llmserve::testing::PrefetchGuard;
using llmserve::testing::PrefetchNtaGuard;

struct Shape {
  int64_t rows, cols, n_tokens;
};

std::vector<Shape> shapes_for(TensorType type) {
  const int64_t blk = gguf::type_info(type)->block_elems;
  const int64_t c1 = blk == 256 ? 256 : blk == 32 ? 96 : 37;  // odd column count for float types
  const int64_t c2 = blk == 256 ? 768 : blk == 32 ? 320 : 300;
  // Wider than their format's slice_cols (panel.h): packed as several column
  // slices, the last narrower; q8_0 and q4_0, whose panels are whole up to
  // 8192 columns, get the 8480 shape below for that (and 2336 ends their
  // panels in a group of one block and seven zero ones).
  const int64_t c3 = blk == 256 ? 2816 : blk == 32 ? 2336 : 2100;
  const int64_t c4 = blk == 256 ? 5632 : blk == 32 ? 4160 : 4100;
  std::vector<Shape> out;
  for (int64_t t : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 20}) out.push_back({t % 2 ? 17 : 33, c1, t});
  out.push_back({1, c2, 1});
  out.push_back({15, c2, 3});
  out.push_back({16, c1, 1});
  out.push_back({45, c2, 6});
  out.push_back({70, c2, 100});   // prefill-like: several tiles of tokens
  out.push_back({40, 4096, 70});  // activations too large for one L2 token block
  out.push_back({20, c3, 130});   // f16 / bf16 widened to f32 (130 >= kWidenTokens in matmul.cpp)
  out.push_back({400, c1, 5});    // chunks of several panels per thread
  out.push_back({33, c3, 1});
  out.push_back({17, c4, 9});
  if (type == TensorType::Q8_0 || type == TensorType::Q4_0) out.push_back({17, 8480, 9});  // 2 slices
  return out;
}

// The activations the integer kernels actually multiply: x rounded to int8
// per 32-block (the scalar quantizer; every ISA's is bit-identical).
std::vector<float> rounded_activations(const std::vector<float>& x, int64_t n_tokens, int64_t cols) {
  std::vector<Q8Act> q(static_cast<size_t>(cols / kQBlock));
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    isa_kernels(Isa::scalar).matmul->quantize(x.data() + t * cols, cols, q.data(), 1);
    for (int64_t c = 0; c < cols; ++c) out[t * cols + c] = q[c / kQBlock].d * q[c / kQBlock].qs[c % kQBlock];
  }
  return out;
}

class MatmulTest : public ::testing::TestWithParam<std::tuple<TensorType, Isa>> {};

TEST_P(MatmulTest, MatchesReference) {
  const auto [type, isa] = GetParam();
  IsaGuard guard(isa);
  const bool int_kernel = is_quantized(panel_format(type));
  std::mt19937 rng(1234 + static_cast<int>(type));
  ThreadPool pool(3);  // more threads than this machine's cores: uneven splits, real contention
  for (const Shape& s : shapes_for(type)) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " tokens " +
                 std::to_string(s.n_tokens));
    const llmserve::testing::RandomMatrix m(rng, type, s.rows, s.cols, pool);
    const Matrix &w = m.w, &prepared = m.prepared;
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(s.n_tokens * s.cols));
    const size_t n_out = static_cast<size_t>(s.rows * s.n_tokens);

    std::vector<float> y_unprepared(n_out), y(n_out), ref(n_out), ref_q(n_out);
    matmul(w, x.data(), s.n_tokens, y_unprepared.data(), pool);
    EXPECT_EQ(prepared.packed != nullptr, has_own_panel_format(type));
    matmul(prepared, x.data(), s.n_tokens, y.data(), pool);
    EXPECT_EQ(y, y_unprepared) << "prepared and on-the-fly panels must give identical results";
    for (const bool all : {false, true})
      for (const bool nta : {false, true}) {
        PrefetchGuard formats(all);
        PrefetchNtaGuard hint(nta);
        std::vector<float> y_other(n_out);
        matmul(prepared, x.data(), s.n_tokens, y_other.data(), pool);
        EXPECT_EQ(y, y_other) << "every software prefetch setting must give identical results (all " << all
                              << ", nta " << nta << ")";
      }

    // Batch invariance: each token alone gives the same bits (batched decode
    // must produce what decoding alone produces).
    std::vector<float> y1(static_cast<size_t>(s.rows));
    for (int64_t t = 0; t < s.n_tokens; t += 7) {
      matmul(prepared, x.data() + t * s.cols, 1, y1.data(), pool);
      EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + t * s.rows)) << "token " << t << " alone differs";
    }

    matmul_reference(w, x.data(), s.n_tokens, ref.data());
    const auto xq = int_kernel ? rounded_activations(x, s.n_tokens, s.cols) : x;
    matmul_reference(w, xq.data(), s.n_tokens, ref_q.data());

    const auto wf = llmserve::testing::dequantize_rows(type, m.raw, s.rows, s.cols);
    int bad = 0;
    for (int64_t t = 0; t < s.n_tokens && bad < 5; ++t)
      for (int64_t r = 0; r < s.rows && bad < 5; ++r) {
        double abs_dot = 0, rounding = 0;
        for (int64_t c = 0; c < s.cols; ++c) {
          const float* xb = &x[t * s.cols + c / kQBlock * kQBlock];
          float amax = 0;
          if (int_kernel)
            for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
          abs_dot += std::fabs(wf[r * s.cols + c] * xq[t * s.cols + c]);
          rounding += std::fabs(wf[r * s.cols + c]) * amax / 254.0;
        }
        const size_t i = t * s.rows + r;
        const double slack = 2e-5 * abs_dot + 1e-30;
        if (std::fabs(y[i] - ref_q[i]) > slack || std::fabs(y[i] - ref[i]) > rounding * 1.0001 + slack) {
          ++bad;
          ADD_FAILURE() << "t " << t << " r " << r << ": got " << y[i] << ", reference " << ref[i]
                        << " (with rounded activations " << ref_q[i] << "), |w||x| " << abs_dot;
        }
      }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<TensorType, Isa>>& info) {
  return std::string(gguf::type_info(std::get<0>(info.param))->name) + "_" +
         std::string(isa_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         ::testing::Combine(::testing::Values(TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K,
                                                              TensorType::Q6_K, TensorType::F32, TensorType::F16,
                                                              TensorType::BF16, TensorType::Q4_1, TensorType::Q5_0,
                                                              TensorType::Q5_1, TensorType::Q5_K),
                                            ::testing::ValuesIn(llmserve::testing::runnable_isas())),
                         case_name);

// Wide matrices are packed as column slices: every slice but the last whole
// 256-column units, none wider than the format's slice_cols, covering the
// columns once.
TEST(MatmulSlices, CoverTheColumnsInWholeSuperBlocks) {
  for (int f = 0; f < static_cast<int>(PanelFormat::count); ++f) {
    const auto format = static_cast<PanelFormat>(f);
    const int64_t max_width = slice_cols(format);
    EXPECT_EQ(max_width % 256, 0);
    for (int64_t cols : {32, 300, 512, 1024, 2048, 2080, 2100, 2336, 2816, 4096, 4100, 4160, 5632, 11008, 32800}) {
      SCOPED_TRACE("format " + std::to_string(f) + " cols " + std::to_string(cols));
      const ColumnSlices slices = column_slices(format, cols);
      EXPECT_EQ(slices.count > 1, cols > max_width);
      int64_t covered = 0;
      for (int64_t s = 0; s < slices.count; ++s) {
        const int64_t c = slices.cols(s, cols);
        EXPECT_GT(c, 0);
        EXPECT_LE(c, std::min(cols, max_width));
        if (s + 1 < slices.count) {
          EXPECT_EQ(c % 256, 0);
        }
        covered += c;
      }
      EXPECT_EQ(covered, cols);
    }
  }
  // MatchesReference's wide shapes (c3, c4; for q8_0 and q4_0 8480: 2 slices) exercise 2 and 3 or more slices.
  for (int64_t cols : {2100, 4100}) EXPECT_EQ(column_slices(PanelFormat::f32, cols).count, cols / 2048 + 1) << cols;
  for (auto [format, cols] : {std::pair{PanelFormat::q8_0, 8480}, {PanelFormat::q4_0, 8480}, {PanelFormat::q4_k, 2816},
                              {PanelFormat::q6_k, 2816}})
    EXPECT_GE(column_slices(format, cols).count, 2) << cols;
}

// A quantized panel's sums go on from slice to slice (PanelArgs::resume):
// packed as slices, each kernel call starting from the last one's sums, a
// panel gives the bits of one call over all its columns, for every ISA,
// decode (one token) and tiles of tokens alike. This is what lets the AMX
// tiles take all the slices in one call (matmul_amx_test checks those).
TEST(MatmulSlices, QuantizedSumsGoOnAcrossSlices) {
  std::mt19937 rng(77);
  ThreadPool pool(1);
  for (const Isa isa : llmserve::testing::runnable_isas())
    for (const TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
      // At least 3 slices, the last narrower; Q8_0's and Q4_0's of an odd
      // number of blocks.
      const int64_t cols = type == TensorType::Q8_0 || type == TensorType::Q4_0 ? 16416 : 2816;
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(gguf::type_info(type)->name));
      const PanelFormat format = panel_format(type);
      const MatmulKernels& kernels = *isa_kernels(isa).matmul;
      const PanelKernel kernel = kernels.panel[1][0][static_cast<int>(format)];
      const llmserve::testing::RandomMatrix m(rng, type, kPanelRows, cols, pool);
      const ColumnSlices slices = column_slices(format, cols);
      ASSERT_GE(slices.count, 3);
      const int64_t nb = cols / kQBlock;
      for (const int64_t n_tokens : {1, 5, 16}) {
        const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(n_tokens * cols));
        std::vector<Q8Act> acts(static_cast<size_t>(n_tokens * nb));
        for (int64_t t = 0; t < n_tokens; ++t)
          kernels.quantize(x.data() + t * cols, cols, &acts[act_index(t, 0, n_tokens, nb)],
                           act_group_width(t, n_tokens));
        PanelArgs a{};
        a.n_panels = 1;
        a.x = acts.data();
        a.x_stride = nb;
        a.n_tokens = n_tokens;
        a.y_stride = kPanelRows;
        a.rows = kPanelRows;
        auto run = [&](const Matrix& w, int64_t block0, bool resume, float* y) {
          PackedWeights panel(panel_bytes(format, w.cols));
          pack_panel(w, 0, panel.data());
          a.panel = panel.data();
          a.panel_stride = panel_bytes(format, w.cols);
          a.cols = w.cols;
          a.x_block0 = block0;
          a.resume = resume;
          a.y = y;
          kernel(a);
        };
        std::vector<float> whole(static_cast<size_t>(n_tokens * kPanelRows)), sliced(whole.size());
        run(m.w, 0, false, whole.data());
        const auto info = gguf::type_info(type);
        for (int64_t s = 0; s < slices.count; ++s) {
          Matrix slice = m.w;
          slice.data += s * slices.width / info->block_elems * info->block_bytes;
          slice.cols = slices.cols(s, cols);
          run(slice, s * slices.width / kQBlock, s > 0, sliced.data());
        }
        EXPECT_EQ(sliced, whole) << n_tokens << " tokens";
      }
    }
}

// Several targets sharing one input give exactly what separate calls give,
// whatever mix of types and prepared / unprepared matrices; so does a
// MatmulJob run by hand, its chunks in any order on one thread. Too many
// targets, or targets of different widths, are refused.
TEST(MatmulTargets, MatchSeparateCalls) {
  ThreadPool pool(3);
  std::mt19937 rng(99);
  const int64_t cols = 512;
  const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::F16, TensorType::Q4_1, TensorType::Q8_0};
  const int64_t rows[] = {33, 256, 17, 40, 1};
  std::vector<std::vector<uint8_t>> raw;
  std::vector<Matrix> ws;
  std::vector<PackedWeights> storage;
  for (int i = 0; i < 5; ++i) {
    raw.push_back(llmserve::testing::random_rows(rng, types[i], rows[i], cols));
    ws.push_back(Matrix{types[i], raw.back().data(), rows[i], cols, llmserve::testing::row_bytes_of(types[i], cols)});
    if (i % 2 == 0) storage.push_back(prepare(ws.back()));
  }
  for (int64_t n_tokens : {1, 7, 40}) {
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(n_tokens * cols));
    std::vector<std::vector<float>> together(5), alone(5);
    std::vector<MatmulTarget> targets;
    for (int i = 0; i < 5; ++i) {
      together[i].resize(rows[i] * n_tokens);
      alone[i].resize(rows[i] * n_tokens);
      targets.push_back({&ws[i], together[i].data()});
      matmul(ws[i], x.data(), n_tokens, alone[i].data(), pool);
    }
    matmul(targets, x.data(), n_tokens, pool);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(together[i], alone[i]) << "target " << i << ", " << n_tokens << " tokens";

    for (auto& y : together) std::fill(y.begin(), y.end(), 0.0f);
    std::vector<Q8Act> acts(static_cast<size_t>(MatmulJob::acts_blocks(targets, n_tokens)));
    const MatmulJob job(targets, x.data(), n_tokens, acts.data());
    for (int64_t t = 0; t < n_tokens; ++t) job.prepare_row(t);
    ASSERT_GT(job.chunks(), 5);
    for (int64_t c = job.chunks() - 1; c >= 0; --c) job.run_chunk(c);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(together[i], alone[i]) << "job, target " << i << ", " << n_tokens << " tokens";
  }
  std::vector<float> y(64), x(64 * 4);
  Matrix other = ws[4];
  other.cols = 256;
  EXPECT_THROW(matmul({{&ws[4], y.data()}, {&other, y.data()}}, x.data(), 1, pool), Error);
  const std::vector<MatmulTarget> many(MatmulJob::kMaxTargets + 1, MatmulTarget{&ws[4], y.data()});
  EXPECT_THROW(MatmulJob(many, x.data(), 1, nullptr), Error);
}

// Decode's chunks are single panels; run_chunks() takes any range of them
// (across tiles, column slices and targets) and gives run_chunk()'s bits.
TEST(MatmulJob, ChunkRangesMatchSingleChunks) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const int64_t cols = 5632;  // three column slices
  // 13 panels (a partial tile), then 3.
  const llmserve::testing::RandomMatrix q8(rng, TensorType::Q8_0, 200, cols, pool);
  const llmserve::testing::RandomMatrix q4(rng, TensorType::Q4_0, 37, cols, pool);
  const Matrix* ws[] = {&q8.prepared, &q4.prepared};
  // Ranges across a tile boundary (8) and the targets' boundary (13).
  const std::pair<int64_t, int64_t> ranges[] = {{0, 5}, {5, 11}, {11, 14}, {14, 16}};
  for (int64_t n_tokens : {1, 16}) {
    const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(n_tokens * cols));
    std::vector<std::vector<float>> single(2), ranged(2);
    std::vector<MatmulTarget> single_targets, ranged_targets;
    for (int i = 0; i < 2; ++i) {
      single[i].resize(ws[i]->rows * n_tokens);
      ranged[i].resize(ws[i]->rows * n_tokens);
      single_targets.push_back({ws[i], single[i].data()});
      ranged_targets.push_back({ws[i], ranged[i].data()});
    }
    std::vector<Q8Act> acts(static_cast<size_t>(MatmulJob::acts_blocks(single_targets, n_tokens)));
    const MatmulJob one(single_targets, x.data(), n_tokens, acts.data());
    const MatmulJob many(ranged_targets, x.data(), n_tokens, acts.data());
    for (int64_t t = 0; t < n_tokens; ++t) one.prepare_row(t);
    ASSERT_EQ(one.chunks(), 13 + 3);
    ASSERT_EQ(one.tile_chunks(), 8);
    for (int64_t c = 0; c < one.chunks(); ++c) one.run_chunk(c);
    for (const auto& [c0, c1] : ranges) many.run_chunks(c0, c1);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(ranged[i], single[i]) << "target " << i << ", " << n_tokens << " tokens";
  }
}

// prepare_all (how the model packs all its matrices into one allocation)
// gives the panels prepare() gives, each 64-byte aligned, back to back.
TEST(MatmulPrepare, IntoOneBufferMatchesSeparateStorage) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  const int64_t cols = 256;
  const TensorType types[] = {TensorType::Q8_0, TensorType::Q4_1, TensorType::Q4_K, TensorType::F16};
  const int64_t rows[] = {33, 20, 16, 5};
  std::vector<std::vector<uint8_t>> raw;
  std::vector<Matrix> alone, shared;
  std::vector<PackedWeights> storage;
  size_t total = 0;
  for (int i = 0; i < 4; ++i) {
    raw.push_back(llmserve::testing::random_rows(rng, types[i], rows[i], cols));
    alone.push_back(Matrix{types[i], raw.back().data(), rows[i], cols, llmserve::testing::row_bytes_of(types[i], cols)});
    shared.push_back(alone.back());
    storage.push_back(prepare(alone.back(), &pool));
    EXPECT_EQ(storage.back().size() % 64, 0u) << "type " << i;
    total += storage.back().size();
  }
  EXPECT_EQ(storage[1].size(), 0u) << "q4_1 has no panel kernel";
  std::vector<Matrix*> order;
  for (Matrix& m : shared) order.push_back(&m);
  const PackedWeights one = prepare_all(order, &pool);
  EXPECT_EQ(one.size(), total);
  EXPECT_EQ(shared[0].packed, one.data());
  EXPECT_EQ(shared[1].packed, nullptr);
  EXPECT_EQ(shared[2].packed, one.data() + storage[0].size());
  EXPECT_EQ(shared[3].packed, shared[2].packed + storage[2].size());
  const auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(3 * cols));
  for (int i = 0; i < 4; ++i) {
    std::vector<float> a(rows[i] * 3), b(rows[i] * 3);
    matmul(alone[i], x.data(), 3, a.data(), pool);
    matmul(shared[i], x.data(), 3, b.data(), pool);
    EXPECT_EQ(a, b) << "type " << i;
  }
}

TEST(MatmulQuantize, EveryIsaRoundsIdentically) {
  std::mt19937 rng(7);
  const int64_t cols = 32 * 40;
  auto x = llmserve::testing::random_floats(rng, cols, 3.0f);
  for (int i = 0; i < 32; ++i) x[64 + i] = 0.0f;  // an all-zero block
  x[5] = 1e-30f;                                   // tiny values next to large ones
  // Each ISA also writes with a block stride (the activations' groups,
  // matmul.h), which must leave the blocks in between alone.
  constexpr int64_t kStride = 3;
  std::vector<Q8Act> want(cols / 32), got(cols / 32 * kStride);
  isa_kernels(Isa::scalar).matmul->quantize(x.data(), cols, want.data(), 1);
  for (Isa isa : llmserve::testing::runnable_isas()) {
    std::memset(got.data(), 0x5a, got.size() * sizeof(Q8Act));
    isa_kernels(isa).matmul->quantize(x.data(), cols, got.data(), kStride);
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_EQ(0, std::memcmp(&want[b], &got[b * kStride], sizeof(Q8Act))) << isa_name(isa) << " block " << b;
      const auto* gap = reinterpret_cast<const uint8_t*>(&got[b * kStride + 1]);
      EXPECT_TRUE(std::all_of(gap, gap + 2 * sizeof(Q8Act), [](uint8_t v) { return v == 0x5a; })) << isa_name(isa);
    }
  }
}

TEST(MatmulErrors, RejectsUnsupportedTypesAndShapes) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(512), y(16);
  Matrix q2k{TensorType::Q2_K, bytes.data(), 1, 256, 84};
  EXPECT_THROW(matmul(q2k, x.data(), 1, y.data(), pool), Error);
  Matrix ragged{TensorType::Q8_0, bytes.data(), 1, 48, 51};
  EXPECT_THROW(matmul(ragged, x.data(), 1, y.data(), pool), Error);
  EXPECT_THROW(prepare(ragged), Error);
  Matrix short_rows{TensorType::Q8_0, bytes.data(), 2, 64, 34};
  EXPECT_THROW(matmul(short_rows, x.data(), 1, y.data(), pool), Error);
}

}  // namespace
}  // namespace llmserve::kernels
