#pragma once
// Summary statistics of repeated measurements (bench, bench_kernels): the
// host's rates move between runs, so results are medians, not means.
#include <algorithm>
#include <vector>

namespace llmserve {

// The middle value of v, the mean of the middle two for an even count; 0
// for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + v[mid]) / 2;
}

}  // namespace llmserve
