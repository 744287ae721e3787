#!/usr/bin/env bash
# The serving numbers of the README, in one run (build first: scripts/setup.sh).
#   1. bench-serve against `llmserve serve` on synthetic tinyllama-1.1b Q8_0 at
#      concurrency 1, 4 and 16; at concurrency 1 bench-serve also reports the
#      HTTP overhead per token (client TPOT minus the engine's own TPOT for the
#      same requests, from /metrics). `llmserve bench` follows as the
#      engine-only yardstick.
#   2. The llama-server comparison workload: tinyllama-1.1b Q4_0, 8 concurrent
#      streams, 146-token prompts, 64 generated tokens, 3 rounds.
# Usage: scripts/bench_serving.sh [models-dir]   (default /tmp/llmserve-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/llmserve-bench}
mkdir -p "$dir"
bin=build/llmserve
port=18080
threads=2

for type in q8_0 q4_0; do
  f="$dir/tinyllama-1.1b-$type.gguf"
  [[ -f $f ]] || "$bin" gen-model --shape tinyllama-1.1b --type "$type" -o "$f"
done

server_pid=
stop_server() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=; }
trap stop_server EXIT
start_server() {
  "$bin" serve -m "$1" --port "$port" -t "$threads" --kv-mem 1024 --log-level warn &
  server_pid=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return
    sleep 0.5
  done
  echo "server did not come up" >&2
  exit 1
}
bench_serve() { "$bin" bench-serve --url "http://127.0.0.1:$port" "$@"; }

echo "### 1. tinyllama-1.1b Q8_0: bench-serve at concurrency 1, 4, 16 (prompt 64, output 64)"
start_server "$dir/tinyllama-1.1b-q8_0.gguf"
bench_serve --concurrency 1 --num-prompts 8 --input-len 64 --output-len 64
bench_serve --concurrency 4 --num-prompts 16 --input-len 64 --output-len 64
bench_serve --concurrency 16 --num-prompts 32 --input-len 64 --output-len 64
stop_server
echo "### engine only, same model: llmserve bench"
"$bin" bench -m "$dir/tinyllama-1.1b-q8_0.gguf" -t "$threads" -p 64 -n 64 --reps 3

echo "### 2. llama-server workload: tinyllama-1.1b Q4_0, 8 concurrent, prompt 146, output 64, 3 rounds"
start_server "$dir/tinyllama-1.1b-q4_0.gguf"
bench_serve --concurrency 8 --num-prompts 24 --input-len 146 --output-len 64
stop_server
