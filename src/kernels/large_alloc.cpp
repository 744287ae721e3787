#include "kernels/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

namespace llmserve::kernels {

void* allocate_large(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size == 0 ? align : size);
  // Advice only: without THP support the memory simply stays in small pages.
  if (p != nullptr && align == kHuge) madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace llmserve::kernels
