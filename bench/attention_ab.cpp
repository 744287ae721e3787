// Old and new attention work items, alternated in one process: the only
// stable way found to compare two versions of attention_impl.h on a shared
// host, where whole `bench` runs move by 10-20% between minutes. Built and
// run by scripts/attention_ab.sh, which supplies the old header (an earlier
// revision's attention_impl.h in namespace attention_old); not part of the
// CMake build.
//
// One decode token of one sequence on one thread: one item of all the KV
// heads, as AttentionJob::plan makes it, or with more query heads per KV
// head than the narrow path takes, every KV head's item in turn
// (--old-per-head: the old side one item per KV head, as plans made them
// up to a6e366b, and at 0d4462d with GQA). --cold reads 96 MiB between
// calls, so the cache comes from memory as in a real decode step (the
// weights stream through the caches between layers). Prints the median and quartiles of
// old time / new time over the rounds (> 1: new is faster). Two builds of
// the same code can differ by a few percent here (code layout), so read
// differences under 5% with `--only old|new` under `valgrind
// --tool=callgrind` too (instruction counts).
//
//   attention_ab [--cold] [--only old|new] [--old-per-head] N_CTX N_KV GROUP HEAD_DIM [q8_0]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention_old_impl.h"
#include "gguf/quant.h"
#include "kernels/attention_impl.h"
#include "kernels/large_alloc.h"
#ifdef __AVX512F__
#include "kernels/simd_avx512.h"
using VF = llmserve::kernels::avx512::VF;
#else
#include "kernels/simd_avx2.h"
using VF = llmserve::kernels::avx2::VF;
#endif

namespace {

using namespace llmserve::kernels;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int usage() {
  std::fprintf(stderr, "usage: attention_ab [--cold] [--only old|new] [--old-per-head] N_CTX N_KV GROUP HEAD_DIM [q8_0]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool cold = false, old_per_head = false;
  std::string only;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cold") cold = true;
    else if (a == "--old-per-head") old_per_head = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else args.push_back(a);
  }
  if (args.size() < 4 || (!only.empty() && only != "old" && only != "new")) return usage();
  const int n_ctx = std::stoi(args[0]), n_kv = std::stoi(args[1]), group = std::stoi(args[2]);
  const int head_dim = std::stoi(args[3]);
  const auto type = args.size() > 4 && args[4] == "q8_0" ? llmserve::gguf::TensorType::Q8_0
                                                          : llmserve::gguf::TensorType::F16;
  if (n_ctx < 1 || n_kv < 1 || group < 1 || head_dim < 1) return usage();

  const AttentionShape shape{n_kv * group, n_kv, head_dim};
  const int block = 16, kv_dim = n_kv * head_dim;
  const KvLayout layout{type, block, kv_dim, llmserve::gguf::row_bytes(type, kv_dim)};
  const int n_blocks = (n_ctx + block - 1) / block;
  const size_t cache_bytes = static_cast<size_t>(n_blocks) * block * layout.row_bytes;
  auto* k = static_cast<uint8_t*>(allocate_large(cache_bytes));  // huge pages, as the engine's cache
  auto* v = static_cast<uint8_t*>(allocate_large(cache_bytes));
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> row(kv_dim);
  for (int64_t p = 0; p < int64_t{n_blocks} * block; ++p)
    for (uint8_t* cache : {k, v}) {
      for (float& x : row) x = dist(rng);
      llmserve::gguf::quantize_row(type, row.data(), cache + p * layout.row_bytes, kv_dim);
    }
  std::vector<int32_t> table(n_blocks);
  for (int i = 0; i < n_blocks; ++i) table[i] = n_blocks - 1 - i;  // scattered blocks
  std::vector<float> q(static_cast<size_t>(n_kv) * group * head_dim), out(q.size()), out_old(q.size());
  for (float& x : q) x = dist(rng);
  const AttentionSeq seq{q.data(), out.data(), 1, n_ctx - 1, table.data()};
  const AttentionCall call{shape, layout, k, v};
  const size_t scratch_bytes = (attention_scratch_floats(group, n_kv, head_dim, VF::N) * sizeof(float) + 63) / 64 * 64;
  auto* scratch = static_cast<float*>(std::aligned_alloc(64, scratch_bytes));  // 64-byte aligned, as the job's
  std::vector<uint8_t> flush(size_t{96} << 20, 1);
  uint64_t sink = 0;

  auto run = [&](bool use_new) {
    if (cold)
      for (size_t i = 0; i < flush.size(); i += 64) sink += flush[i];
    const double t0 = now();
    const bool all_heads = group <= narrow_rows_max(VF::N) && (use_new || !old_per_head);
    for (int h = 0; h < (all_heads ? 1 : n_kv); ++h) {
      const AttentionItem it{.seq = &seq, .kv_head = h, .t0 = 0, .t1 = 1, .n_heads = all_heads ? n_kv : 1};
      if (use_new) attention_impl::item<VF>(call, it, scratch);
      else attention_old::item<VF>(call, it, scratch);
    }
    return now() - t0;
  };
  auto release = [&] {
    for (void* p : {static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(scratch)}) std::free(p);
  };
  if (!only.empty()) {
    for (int r = 0; r < 3; ++r) run(only == "new");
    std::printf("%s: 3 calls done (%g)\n", only.c_str(), static_cast<double>(out[0]));
    release();
    return 0;
  }

  constexpr int kRounds = 61;
  std::vector<double> t_old, t_new, ratio;
  double max_diff = 0;
  for (int r = 0; r < kRounds; ++r) {
    const bool new_first = r % 2 == 1;
    double a = 0, b = 0;
    if (new_first) b = run(true);
    a = run(false);
    out_old = out;
    if (!new_first) b = run(true);
    for (size_t i = 0; i < out.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(out[i] - out_old[i])));
    t_old.push_back(a);
    t_new.push_back(b);
    ratio.push_back(a / b);
  }
  std::sort(t_old.begin(), t_old.end());
  std::sort(t_new.begin(), t_new.end());
  std::sort(ratio.begin(), ratio.end());
  const double flops = 4.0 * n_ctx * head_dim * n_kv * group;
  std::printf("%d x %d heads of %d, %d keys, %s cache, %s, %d lanes (sink %d)\n", n_kv, group, head_dim, n_ctx,
              type == llmserve::gguf::TensorType::Q8_0 ? "q8_0" : "f16", cold ? "cold" : "warm", VF::N,
              static_cast<int>(sink & 1));
  std::printf("old %8.1f us  %5.1f GFLOP/s\nnew %8.1f us  %5.1f GFLOP/s\n", t_old[kRounds / 2] * 1e6,
              flops / t_old[kRounds / 2] / 1e9, t_new[kRounds / 2] * 1e6, flops / t_new[kRounds / 2] / 1e9);
  std::printf("old/new median %.3f (quartiles %.3f-%.3f), max |old - new| %g\n", ratio[kRounds / 2],
              ratio[kRounds / 4], ratio[3 * kRounds / 4], max_diff);
  release();
}
