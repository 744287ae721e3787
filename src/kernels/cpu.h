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
// bandwidth it gets: Intel's hardware prefetchers alone keep too few lines
// in flight, while on AMD's cores it measured level. So: on unless the CPU
// is AMD's (or Hygon's, the same cores). LLMSERVE_PREFETCH=0|1 in the
// environment at first use overrides that.
bool prefetch_weights();

// Forces the setting. Like set_isa(): call it between ops.
void set_prefetch_weights(bool on);

// Whether decode's prefetch (tiles of one token) is non-temporal
// (prefetchnta: into L1, marked to leave the caches first) instead of into
// L2 (prefetcht1). Decode reads every weight once per token, so nothing is
// lost by keeping it out of the way; tiles of several tokens reread their
// panels and always use T1 (matmul_avx512.cpp: prefetch). It measured
// faster on AMD's cores and was not measured on Intel's, so: on where the
// CPU is AMD's (or Hygon's). LLMSERVE_PREFETCH_NTA=0|1 in the environment
// at first use overrides that. Both settings are the AVX-512 kernels'; the
// AVX2 kernels prefetch the same way in either (matmul_avx2.cpp:
// prefetch_ahead, prefetch_group).
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
