#pragma once
// Watches the largest single allocation made through operator new in this
// test binary, so hostile-input tests can assert that a small file never
// makes the reader allocate gigabytes. Requests above the hard limit throw
// std::bad_alloc instead of reserving address space.
#include <cstddef>

namespace llmserve::testing {

constexpr size_t kAllocationHardLimit = size_t{512} << 20;

size_t largest_allocation();  // since the last reset
void reset_largest_allocation();

}  // namespace llmserve::testing
