// The read-bandwidth probe behind bench's roofline_frac: it keeps its buffer
// between measurements and always reports a finite, positive rate.
#include <gtest/gtest.h>

#include <cmath>

#include "core/thread_pool.h"
#include "kernels/roofline.h"

namespace llmserve::kernels {
namespace {

TEST(ReadProbe, MeasuresRepeatedlyOnAnyThreadCount) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ReadProbe probe(pool, size_t{1} << 20);
    for (int reps : {1, 2}) {
      const double gbs = probe.gbs(reps);
      EXPECT_TRUE(std::isfinite(gbs) && gbs > 0) << threads << " threads: " << gbs;
    }
  }
  ThreadPool pool(2);
  EXPECT_GT(ReadProbe(pool, 100).gbs(), 0);  // smaller than one 256-byte step per thread
  EXPECT_GT(measure_read_bandwidth(pool, size_t{1} << 20, 1), 0);
}

}  // namespace
}  // namespace llmserve::kernels
