// read_pattern/*: how the shape of a streaming loop decides how much of the
// read probe's rate (bench/roofline.h) it gets, on AVX-512 CPUs.
//
// Decode's quantized kernels read their weights at about 0.87 of the probe
// on the Intel AMX host, and stay there whatever they do with the bytes
// (the same with plain adds in place of the dot products, or without the
// scale loads). These loops read a 1 GiB buffer as decode reads a panel
// (per 64-byte line: a prefetch 8 KiB ahead into L2, a load, an add) and
// vary one thing at a time:
//   nops:N     N nops after each line's load (the kernels' kLinePadNops);
//   call:B     one call of the loop per B bytes (34816: a Q8_0 panel of
//              2048 columns, as each_panel() calls the kernel per panel);
//   claim:B    the bytes a thread claims at a time (ThreadPool::
//              parallel_for_shares; 278528: a decode chunk of 8 such
//              panels).
//   groups:G   Q8_0's layout with G blocks a group (panel.h: 8 now, 2
//              before 2026-12-05h): the group's G x 32 bytes of scales
//              first, their lines prefetched together, then G blocks of 8
//              code lines, each block loading its 32 bytes of scales
//              (read_groups; G = 8 is the read probe's fourth pass).
// "vs_read" = the median over iterations of the loop's rate over the
// probe's, read right after it on the same buffer.
//
// On the Intel AMX host (2 threads, 3 runs): no nops 0.80-0.84, 3 nops
// 0.99-1.01; in panel calls and decode chunks 0.98-0.99; the group layout
// (2-block groups) 0.94-0.97, whole or in panel calls. The kernels in the
// same runs (matvec/q8_0/32000x2048) 0.87-0.88. So neither the calls nor
// the claims explain the kernels' gap; the layout costs the loop 0.04-0.05
// of it. On the Zen 5 host (2 runs, against the three-pass probe of then):
// groups:2 0.94-0.98, groups:8 1.26-1.32, which made groups:8 the probe's
// fourth pass (bench/roofline.h).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "bench/roofline.h"
#include "bench/roofline_isa.h"
#include "bench_common.h"
#include "core/stats.h"
#include "kernels/cpu.h"
#include "kernels/large_alloc.h"

namespace llmserve::bench {
namespace {

#if defined(__x86_64__)
constexpr size_t kLoopBytes = 512;  // lines per loop iteration: 8
constexpr int kAheadBytes = 8192;   // decode's prefetch distance (kPrefetchBytes, kernels/formats_avx512.h)

// The asm both loops are made of. READ_LINE(off): the line at byte `off`
// (an assembler expression) from %[p] as decode reads it: prefetched
// %[ahead] bytes on, loaded, %[nops] nops, added into zmm0. NEXT_STEP: on
// by %[step] bytes, back to label 1 while short of %[end]. One text for
// both, so that the loops differ only in the layout they walk.
#define READ_LINE(off)                                      \
  "prefetcht1 %c[ahead]+" off "(%[p])\n\t"                 \
  "vmovdqa64 " off "(%[p]), %%zmm1\n\t"                    \
  ".rept %c[nops]\n\tnop\n\t.endr\n\t"                     \
  "vpaddq %%zmm1, %%zmm0, %%zmm0\n\t"
#define NEXT_STEP "add %[step], %[p]\n\tcmp %[p], %[end]\n\tja 1b"

// Lines [p, end): p 64-byte aligned, end - p a positive multiple of
// kLoopBytes.
template <int kNops>
[[gnu::noinline]] void read_lines(const uint8_t* p, const uint8_t* end) {
  asm volatile(
      "vpxorq %%zmm0, %%zmm0, %%zmm0\n"
      "1:\n\t"
      ".irp off, 0, 64, 128, 192, 256, 320, 384, 448\n\t"
      READ_LINE("\\off")
      ".endr\n\t"
      NEXT_STEP
      : [p] "+r"(p)
      : [end] "r"(end), [ahead] "i"(kAheadBytes), [nops] "i"(kNops), [step] "i"(kLoopBytes)
      : "xmm0", "xmm1", "cc", "memory");
}

// The same over the groups of 1088 bytes Q8_0's panels had before
// 2026-12-05h: a line of scales, then two blocks of 8 lines of codes; each
// block also loads its 32 bytes of scales as 16 floats. end - p a positive
// multiple of kGroupBytes.
constexpr size_t kGroupBytes = 1088;
template <int kNops>
[[gnu::noinline]] void read_groups(const uint8_t* p, const uint8_t* end) {
  asm volatile(
      "vpxorq %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxorq %%zmm3, %%zmm3, %%zmm3\n"
      "1:\n\t"
      "prefetcht1 %c[ahead](%[p])\n\t"
      ".irp block, 0, 1\n\t"
      ".irp line, 1, 2, 3, 4, 5, 6, 7, 8\n\t"
      READ_LINE("64*(8*\\block+\\line)")
      ".endr\n\t"
      "vcvtph2ps 32*\\block(%[p]), %%zmm2\n\t"
      "vaddps %%zmm2, %%zmm3, %%zmm3\n\t"
      ".endr\n\t"
      NEXT_STEP
      : [p] "+r"(p)
      : [end] "r"(end), [ahead] "i"(kAheadBytes), [nops] "i"(kNops), [step] "i"(kGroupBytes)
      : "xmm0", "xmm1", "xmm2", "xmm3", "cc", "memory");
}

// Q8_0's groups of today (panel.h: 8 blocks, 4352 bytes): the read probe's
// own pass in that layout (bench/roofline_avx512.cpp), the same loop with
// 4 lines of scales. end - p a multiple of 4352.
void read_groups_of_8(const uint8_t* p, const uint8_t* end) {
  benchmark::DoNotOptimize(kernels::roofline_kernels(kernels::Isa::avx512).read[3](p, static_cast<size_t>(end - p)));
}
#undef READ_LINE
#undef NEXT_STEP

struct Pattern {
  void (*read)(const uint8_t*, const uint8_t*);
  size_t call_bytes, claim_bytes;  // claim_bytes a multiple of call_bytes, itself of the loop's step
};

constexpr size_t kBufferBytes = size_t{1} << 30;

const uint8_t* buffer() {
  static const uint8_t* buf = [] {
    auto* p = static_cast<uint8_t*>(kernels::allocate_large(kBufferBytes));
    if (p) std::memset(p, 1, kBufferBytes);
    return p;
  }();
  return buf;
}

void read_pattern(benchmark::State& state, Pattern pattern) {
  const size_t claims = kBufferBytes / pattern.claim_bytes, bytes = claims * pattern.claim_bytes;
  const uint8_t* buf = buffer();
  if (!buf) {
    state.SkipWithError("cannot allocate the 1 GiB buffer");
    return;
  }
  std::vector<double> vs_read;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    pool().parallel_for_shares(static_cast<int64_t>(claims), [&](int64_t c) {
      const uint8_t* claim = buf + c * pattern.claim_bytes;
      for (size_t off = 0; off < pattern.claim_bytes; off += pattern.call_bytes)
        pattern.read(claim + off, claim + off + pattern.call_bytes);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    vs_read.push_back(kernels::read_seconds(pool(), buf, bytes / 256 * 256) / s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["vs_read"] = median(vs_read);
}

constexpr size_t kPanel = 34816, kChunk = 8 * kPanel, kMiB = size_t{1} << 20;
static_assert(kPanel % kGroupBytes == 0 && kPanel % 4352 == 0);

#endif

}  // namespace

void register_read_patterns() {
#if defined(__x86_64__)
  if (kernels::active_isa() != kernels::Isa::avx512) return;
  const struct {
    const char* name;
    Pattern pattern;
  } patterns[] = {
      {"nops:0/call:1MiB/claim:1MiB", {read_lines<0>, kMiB, kMiB}},
      {"nops:3/call:1MiB/claim:1MiB", {read_lines<3>, kMiB, kMiB}},
      {"nops:3/call:34816/claim:278528", {read_lines<3>, kPanel, kChunk}},
      {"groups:2/nops:3/call:1114112/claim:1114112", {read_groups<3>, 4 * kChunk, 4 * kChunk}},
      {"groups:2/nops:3/call:34816/claim:278528", {read_groups<3>, kPanel, kChunk}},
      {"groups:8/nops:3/call:1114112/claim:1114112", {read_groups_of_8, 4 * kChunk, 4 * kChunk}},
      {"groups:8/nops:3/call:34816/claim:278528", {read_groups_of_8, kPanel, kChunk}},
  };
  for (const auto& p : patterns)
    benchmark::RegisterBenchmark((std::string("read_pattern/") + p.name).c_str(), read_pattern, p.pattern)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(6);
#endif
}

}  // namespace llmserve::bench
