#!/usr/bin/env bash
# End-to-end tests of `llmserve serve` with real clients (CTest runs this).
#   run_e2e.sh LLMSERVE_BIN MODELS_DIR WORK_DIR {client|load} [SANITIZED]
# Skips (exit 77) when node/npm or the test model are absent. Installs the
# `openai` npm package into WORK_DIR/node_modules on first use.
set -euo pipefail
bin=$1 models=$2 work=$3 which=$4 sanitized=${5:-0}
here=$(cd "$(dirname "$0")" && pwd)
model=$models/stories260K.gguf
second=$models/TinyStories-656K.f16.gguf

command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node/npm not installed"; exit 77; }
skip_without() { [ -f "$1" ] || { echo "SKIP: $1 not found (../shared/models is absent)"; exit 77; }; }
skip_without "$model"

mkdir -p "$work"
if [ ! -f "$work/node_modules/openai/package.json" ]; then
  # openai 4.x still supports Node 18 (Debian's) and 20; 5+ needs newer Node.
  (cd "$work" && npm install --no-audit --no-fund --silent --no-save openai@4 >/dev/null)
fi
cp "$here"/*.mjs "$work/"

log=$work/server-$which.log
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true; }
trap cleanup EXIT

# start_server SERVE-FLAGS... (the models' among them)
start_server() {
  : >"$log"  # emptied here, not in the background job: the loop below must not read the last run's port
  "$bin" serve --host 127.0.0.1 --port 0 -t 1 --kv-mem 256 "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log" | head -1)
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "server exited"; exit 1; }
    sleep 0.1
  done
  cat "$log"; echo "server did not start"; exit 1
}

# SIGTERM: in-flight work finishes, the server exits 0.
stop_server() {
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=
  [ "$rc" = 0 ] || { tail -20 "$log"; echo "server exited with $rc after SIGTERM"; exit 1; }
}

case $which in
  client)
    skip_without "$second"
    start_server -m stories260K="$model" -m TinyStories-656K="$second" --api-key sk-main --api-key sk-burst \
      --rate-limit 20 --rate-burst 40 --max-body 65536 --allowed-origins http://app.example
    LLMSERVE_URL=http://127.0.0.1:$port node "$work/openai_client_test.mjs"
    stop_server ;;
  load)
    start_server -m "$model" --max-queue 128 --max-seqs 64 --timeout 120 --log-level warn
    check_rss=1
    [ "$sanitized" = 1 ] && check_rss=0  # ASan's quarantine holds freed memory on purpose
    LLMSERVE_URL=http://127.0.0.1:$port LLMSERVE_PID=$pid LLMSERVE_CHECK_RSS=$check_rss node "$work/load_test.mjs"
    stop_server ;;
  *) echo "usage: $0 BIN MODELS WORK {client|load} [SANITIZED]"; exit 2 ;;
esac
