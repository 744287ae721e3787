#!/usr/bin/env bash
# Start-up time and idle memory of `llmserve serve` with default flags.
#   scripts/startup_memory.sh MODEL.gguf [LLMSERVE_BIN] [extra serve flags...]
# Starts serve, polls /health every 20 ms from the moment of launch, then
# after a second idle reads VmRSS from /proc/PID/status and stops it with
# SIGTERM. Prints seconds to the first 200 from /health, idle RSS, and RSS as
# a multiple of the model file's size (the README's targets: ready within
# 2 s; RSS at most the weights + 15%, under 100 MB for stories260K).
set -euo pipefail
model=${1:?usage: $0 MODEL.gguf [LLMSERVE_BIN] [serve flags...]}
bin=${2:-$(dirname "$0")/../build/llmserve}
shift $(( $# >= 2 ? 2 : 1 ))
[[ -f $model ]] || { echo "error: no model file $model" >&2; exit 1; }
[[ -x $bin ]] || { echo "error: no llmserve binary at $bin (build first, or pass its path)" >&2; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -f "$log"; }
trap cleanup EXIT

start=$(date +%s.%N)
"$bin" serve -m "$model" --host 127.0.0.1 --port "$port" "$@" >"$log" 2>&1 &
pid=$!
until curl -sf -o /dev/null "http://127.0.0.1:$port/health"; do
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "error: serve exited" >&2; exit 1; }
  sleep 0.02
done
ready=$(date +%s.%N)
sleep 1
rss_kib=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
kill -TERM "$pid"
wait "$pid" || true
pid=

file_bytes=$(stat -c %s "$model")
awk -v m="$model" -v f="$file_bytes" -v s="$start" -v r="$ready" -v k="$rss_kib" 'BEGIN {
  printf "model         %s (%.1f MiB)\n", m, f / 1048576
  printf "ready after   %.2f s (/health 200)\n", r - s
  printf "idle RSS      %.1f MiB (%.2f x the file)\n", k / 1024, k * 1024 / f
}'
sed -n 's/.*\] \[info\] \(KV cache: .*\)/kv            \1/p' "$log"
