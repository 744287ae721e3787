#pragma once
// Memory the kernels stream through (packed weights, the KV cache,
// bandwidth probes).
// Blocks of 2 MiB or more are 2 MiB aligned and advised as transparent huge
// pages: streaming a gigabyte through 4 KiB pages spends a TLB miss every
// 4 KiB, which costs bandwidth. Smaller blocks are 64-byte aligned.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace llmserve::kernels {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Returns null on failure. Release with std::free.
void* allocate_large(size_t bytes);

// Zero-filled memory that the OS commits page by page as it is first
// written: reserving it costs address space, not memory, and nothing here
// touches it. Aligned and advised as allocate_large (a first write then
// commits one huge page). Null on failure.
struct UnmapPages {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
using ZeroPages = std::unique_ptr<uint8_t, UnmapPages>;
ZeroPages map_zero_pages(size_t bytes);

}  // namespace llmserve::kernels
