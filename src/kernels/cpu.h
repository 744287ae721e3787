#pragma once
// Which instruction set the kernels use. Detected once from CPUID (and the
// OS's XSAVE state, so a kernel never uses registers the OS does not save);
// tests and benchmarks may force a lower level to exercise every path.
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

}  // namespace llmserve::kernels
