#include "kernels/cpu.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace llmserve::kernels {

namespace {

struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

bool bit(uint32_t reg, int n) { return (reg >> n) & 1u; }

// XCR0: which register state the OS saves on a context switch.
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Isa detect() {
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  if (!osxsave || !bit(l1.c, 28) /*avx*/) return Isa::scalar;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;      // SSE + AVX
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;    // + opmask, ZMM_Hi256, Hi16_ZMM
  const Regs l7 = cpuid(7, 0);
  const bool avx2 = ymm_state && bit(l7.b, 5) && bit(l1.c, 12) /*fma*/ && bit(l1.c, 29) /*f16c*/;
  if (!avx2) return Isa::scalar;
  const bool avx512 = zmm_state && bit(l7.b, 16) /*f*/ && bit(l7.b, 17) /*dq*/ && bit(l7.b, 30) /*bw*/ &&
                      bit(l7.b, 31) /*vl*/ && bit(l7.c, 11) /*vnni*/;
  return avx512 ? Isa::avx512 : Isa::avx2;
}

Isa from_env(Isa detected) {
  const char* env = std::getenv("LLMSERVE_ISA");
  if (env == nullptr || *env == 0) return detected;
  const std::string_view s(env);
  Isa want;
  if (s == "scalar") want = Isa::scalar;
  else if (s == "avx2") want = Isa::avx2;
  else if (s == "avx512") want = Isa::avx512;
  else throw Error("LLMSERVE_ISA=" + std::string(s) + ": expected scalar, avx2 or avx512");
  return want < detected ? want : detected;
}

bool amd_cores() {
  const Regs l0 = cpuid(0, 0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.b, 4);
  std::memcpy(vendor + 4, &l0.d, 4);
  std::memcpy(vendor + 8, &l0.c, 4);
  const std::string_view v(vendor);
  return v == "AuthenticAMD" || v == "HygonGenuine";
}

// A 0|1 setting from the environment, `unset` where it is absent or empty.
bool flag_from_env(const char* name, bool unset) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == 0) return unset;
  const std::string_view s(env);
  if (s == "0" || s == "1") return s == "1";
  throw Error(std::string(name) + "=" + std::string(s) + ": expected 0 or 1");
}

// AMX-TILE, AMX-INT8, AMX-BF16 and AVX512-BF16 (every AMX CPU so far has
// all four), tile state in XCR0 (XTILECFG and
// XTILEDATA, bits 17-18), and Linux's permission for this process to use
// the 8 KiB of tile data (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA).
bool detect_amx() {
  if (detected_isa() != Isa::avx512) return false;
  const Regs l7 = cpuid(7, 0), l7_1 = cpuid(7, 1);
  if (!bit(l7.d, 24) || !bit(l7.d, 25) || !bit(l7.d, 22) || !bit(l7_1.a, 5)) return false;
  if ((xgetbv0() & 0x60000) != 0x60000) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

std::atomic<bool>& amx() {
  static std::atomic<bool> on{flag_from_env("LLMSERVE_AMX", true) && amx_detected()};
  return on;
}

std::atomic<bool>& prefetch() {
  static std::atomic<bool> on{flag_from_env("LLMSERVE_PREFETCH", !amd_cores())};
  return on;
}

std::atomic<bool>& prefetch_nta() {
  static std::atomic<bool> on{flag_from_env("LLMSERVE_PREFETCH_NTA", amd_cores())};
  return on;
}

std::atomic<int>& active() {
  static std::atomic<int> isa{static_cast<int>(from_env(detected_isa()))};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

Isa set_isa(Isa isa) {
  const Isa clamped = isa < detected_isa() ? isa : detected_isa();
  active().store(static_cast<int>(clamped), std::memory_order_relaxed);
  return clamped;
}

bool prefetch_weights() { return prefetch().load(std::memory_order_relaxed); }

void set_prefetch_weights(bool on) { prefetch().store(on, std::memory_order_relaxed); }

bool prefetch_non_temporal() { return prefetch_nta().load(std::memory_order_relaxed); }

void set_prefetch_non_temporal(bool on) { prefetch_nta().store(on, std::memory_order_relaxed); }

bool amx_detected() {
  static const bool detected = detect_amx();
  return detected;
}

bool use_amx() { return amx().load(std::memory_order_relaxed) && active_isa() == Isa::avx512; }

void set_amx(bool on) { amx().store(on && amx_detected(), std::memory_order_relaxed); }

}  // namespace llmserve::kernels
