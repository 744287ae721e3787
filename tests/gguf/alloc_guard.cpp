#include "alloc_guard.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace llmserve::testing {

namespace {
std::atomic<size_t> g_largest{0};
}  // namespace

size_t largest_allocation() { return g_largest.load(); }
void reset_largest_allocation() { g_largest.store(0); }

}  // namespace llmserve::testing

// Replacing these four is enough: the array and nothrow forms call them.
void* operator new(std::size_t n) {
  size_t seen = llmserve::testing::g_largest.load(std::memory_order_relaxed);
  while (n > seen && !llmserve::testing::g_largest.compare_exchange_weak(seen, n)) {
  }
  if (n > llmserve::testing::kAllocationHardLimit) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
