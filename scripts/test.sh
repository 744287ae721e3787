#!/usr/bin/env bash
# The whole test suite: the release build's tests, then the same tests built
# with AddressSanitizer + UndefinedBehaviorSanitizer. Tests that need the
# real models in ../shared/models skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

LLMSERVE_CMAKE_ARGS="-DLLMSERVE_WERROR=ON" scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$jobs"

# -O0 with line tables only: the sanitizers need no optimizer, and the build
# takes half the time of -O2 -g (CMakeLists.txt: llmserve_numeric).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DLLMSERVE_SANITIZE=ON \
      -DLLMSERVE_BENCH=OFF -DLLMSERVE_WERROR=ON >/dev/null
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
