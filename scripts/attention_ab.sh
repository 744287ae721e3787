#!/usr/bin/env bash
# Decode attention of an earlier revision against the working tree's, in one
# process (bench/attention_ab.cpp): the old revision's attention_impl.h goes
# into namespace attention_old, both are compiled into one binary for this
# machine's vector width, and their items alternate on one thread.
#   scripts/attention_ab.sh OLD_REV [--cold] [--only old|new] [--old-per-head] N_CTX N_KV GROUP HEAD_DIM [q8_0]
#   scripts/attention_ab.sh HEAD~1 --cold 900 12 1 64      # stories110m's shape, cache from memory
#   (--old-per-head: for an OLD_REV whose plans made one item per KV head,
#   up to a6e366b, and 0d4462d with GQA)
# Needs the release build (scripts/setup.sh) for the libraries it links.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 5 ] || { sed -n '2,10p' "$0"; exit 2; }
rev=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git show "$rev:src/kernels/attention_impl.h" |
  sed 's/namespace llmserve::kernels::attention_impl/namespace llmserve::kernels::attention_old/' >"$dir/attention_old_impl.h"
cmake --build build --target llmserve_kernels >/dev/null
g++ -O3 -DNDEBUG -std=c++20 -march=native -Wall -Wextra -I src -I "$dir" bench/attention_ab.cpp \
  build/src/kernels/libllmserve_kernels.a build/src/gguf/libllmserve_gguf.a build/src/core/libllmserve_core.a \
  -lpthread -o "$dir/attention_ab"
"$dir/attention_ab" "$@"
