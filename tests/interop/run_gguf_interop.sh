#!/usr/bin/env bash
# CTest driver: writes synthetic models with llmserve and loads them with
# @huggingface/gguf. Skips (exit 77) when node/npm or the package are unavailable.
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null || { echo "node/npm not found: skipped"; exit 77; }
mkdir -p "$work"
if [ ! -d "$work/node_modules/@huggingface/gguf" ]; then
  (cd "$work" && npm install --silent --no-audit --no-fund @huggingface/gguf@0.4.6 >/dev/null 2>&1) ||
    { echo "cannot install @huggingface/gguf from npm: skipped"; exit 77; }
fi
cp "$here/gguf_interop.mjs" "$work/"
for type in f32 f16 q8_0 q4_0; do
  "$bin" gen-model --shape tiny --type "$type" -o "$work/tiny-$type.gguf" 2>/dev/null
  node "$work/gguf_interop.mjs" "$work/tiny-$type.gguf" 39
  rm -f "$work/tiny-$type.gguf"
done
