#include "kernels/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

namespace llmserve::kernels {

namespace {

size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

}  // namespace

void* allocate_large(size_t bytes) {
  const size_t align = bytes >= kHugePageBytes ? kHugePageBytes : 64;
  const size_t size = round_up(bytes, align);
  void* p = std::aligned_alloc(align, size == 0 ? align : size);
  // Advice only: without THP support the memory simply stays in small pages.
  if (p != nullptr && align == kHugePageBytes) madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void UnmapPages::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

ZeroPages map_zero_pages(size_t bytes) {
  const bool huge = bytes >= kHugePageBytes;
  const size_t size = round_up(bytes == 0 ? 1 : bytes, huge ? kHugePageBytes : 4096);
  // Over-reserve by one huge page and trim both ends to get 2 MiB alignment.
  // MAP_NORESERVE: the pool is a budget, committed only as it is used.
  const size_t reserved = huge ? size + kHugePageBytes : size;
  void* raw = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return ZeroPages(nullptr, UnmapPages{});
  auto* start = static_cast<uint8_t*>(raw);
  if (huge) {
    auto* aligned = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(start), kHugePageBytes));
    if (aligned > start) munmap(start, static_cast<size_t>(aligned - start));
    const size_t tail = static_cast<size_t>(start + reserved - (aligned + size));
    if (tail > 0) munmap(aligned + size, tail);
    start = aligned;
    madvise(start, size, MADV_HUGEPAGE);  // advice only, as in allocate_large
  }
  return ZeroPages(start, UnmapPages{size});
}

}  // namespace llmserve::kernels
