#pragma once
// Shared by bench_kernels' files: the pool every benchmark runs on, and the
// functions main() calls to register each file's benchmarks.
#include "core/thread_pool.h"

namespace llmserve::bench {

ThreadPool& pool();  // LLMSERVE_THREADS threads (default: physical cores)

void register_read_patterns();  // read_patterns.cpp

}  // namespace llmserve::bench
