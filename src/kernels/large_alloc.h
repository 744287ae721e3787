#pragma once
// Memory the kernels stream through (packed weights, the KV cache,
// bandwidth probes).
// Blocks of 2 MiB or more are 2 MiB aligned and advised as transparent huge
// pages: streaming a gigabyte through 4 KiB pages spends a TLB miss every
// 4 KiB, which costs bandwidth. Smaller blocks are 64-byte aligned.
#include <cstddef>

namespace llmserve::kernels {

// Returns null on failure. Release with std::free.
void* allocate_large(size_t bytes);

}  // namespace llmserve::kernels
