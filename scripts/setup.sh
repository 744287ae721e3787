#!/usr/bin/env bash
# Installs the Debian packages llmserve needs (when missing) and builds it
# into build/. Safe to run again: it only does what is not yet done.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build clang libclang-rt-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libpcre2-dev
          libboost1.81-dev)
# The end-to-end tests (tests/e2e) run the `openai` npm client: Debian's
# nodejs and npm, unless a Node.js with npm is already there (one from
# another source may conflict with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${LLMSERVE_CMAKE_ARGS:-} >/dev/null
ninja -C build
