#pragma once
// Which instruction set the kernels use, and whether they prefetch weights
// in software. Detected once from CPUID (and the OS's XSAVE state, so a
// kernel never uses registers the OS does not save); tests and benchmarks
// may force a lower level, or either prefetch setting, to exercise every path.
#include <string_view>

namespace llmserve::kernels {

// Ordered: each level implies the ones below it.
//  scalar: plain x86-64 (what the rest of the binary is compiled for).
//  avx2:   AVX2 + FMA + F16C.
//  avx512: AVX-512 F/BW/VL/DQ + VNNI, plus the avx2 set.
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

std::string_view isa_name(Isa isa);

// The best level this CPU and OS support.
Isa detected_isa();

// The level kernels use now: detected_isa(), or lower if LLMSERVE_ISA
// (scalar|avx2|avx512) was set in the environment at first use, or set_isa()
// was called. Requesting more than the CPU has gives the detected level.
Isa active_isa();

// Forces a level (clamped to detected_isa()) and returns what is in effect.
// Not synchronised with running kernels: call it between ops, as tests do.
Isa set_isa(Isa isa);

// Whether the AVX-512 matmul kernels prefetch the float formats' weight
// panels in software (8 KiB ahead; prefetch_non_temporal() says into which
// cache); without it they rely on the hardware prefetchers. The quantized
// formats always prefetch (matmul_avx512.cpp: prefetch). Decode streams
// every weight once per token, so this decides how close to the read
// bandwidth it gets, and the best choice is the CPU's:
//  - Intel Xeon (the 2-vCPU host of this project's Intel rounds): with it,
//    tinyllama Q4_0 decode went from 0.60-0.62 to 0.83-0.86 of the read
//    bandwidth, Q8_0 from 0.80-0.81 to 0.86-0.92 (bench, 3 alternated
//    runs), when this setting still covered them;
//  - AMD Zen 5: tinyllama F16 decoded 0.972x and 1.03x as fast with it
//    (tokens alternated in one `bench` process, 8 rounds each).
// So: on unless the CPU is AMD's (or Hygon's, the same cores).
// LLMSERVE_PREFETCH=0|1 in the environment at first use overrides that.
bool prefetch_weights();

// Forces the setting. Like set_isa(): call it between ops.
void set_prefetch_weights(bool on);

// Whether decode's prefetch (tiles of one token) is non-temporal
// (prefetchnta: into L1, marked to leave the caches first) instead of into
// L2 (prefetcht1). Decode reads every weight once per token, so nothing is
// lost by keeping it out of the way; tiles of several tokens reread their
// panels and always use T1 (matmul_avx512.cpp: prefetch).
//  - AMD Zen 5: NTA over T1 at 8 KiB ahead, the decode step's matmuls
//    1.01-1.07x as fast for Q4_0, 1.07-1.13x for Q4_K, 1.09-1.20x for Q6_K
//    (bench_kernels decode_nta_ab, tinyllama and stories110m shapes, 3
//    paired runs each); 4 and 6 KiB ahead, or T0, did no better for Q4_0;
//  - AMD Zen 4: not measured;
//  - Intel Xeon: measured with T1 only (the figures above).
// So: on where the CPU is AMD's (or Hygon's). LLMSERVE_PREFETCH_NTA=0|1 in
// the environment at first use overrides that. Both settings are the
// AVX-512 kernels'; the AVX2 kernels prefetch the same way in either
// (matmul_avx2.cpp: prefetch_ahead, prefetch_group).
bool prefetch_non_temporal();
void set_prefetch_non_temporal(bool on);

// Whether matmuls may run tokens through AMX tiles (matmul.h, MatmulJob):
// the CPU has AMX-TILE, AMX-INT8, AMX-BF16 and AVX512-BF16, the OS saves
// tile state and granted this process the tile data permission (Linux
// arch_prctl), and the avx512 level is active. LLMSERVE_AMX=0 in the
// environment at first use turns it off.
bool amx_detected();
bool use_amx();
// Forces it on (where detected) or off. Like set_isa(): call it between ops.
void set_amx(bool on);

}  // namespace llmserve::kernels
