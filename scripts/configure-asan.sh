#!/usr/bin/env bash
# Configures the one clang build that fuzzing and the ASan + UBSan unit tests share (both need
# the same instrumented rooms; one build compiles them once). Usage: scripts/configure-asan.sh
# [BUILD_DIR] (default build-asan; FLASHSERVE_ASAN_BUILD_DIR overrides). Prints the directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${FLASHSERVE_ASAN_BUILD_DIR:-$here/build-asan}}"
cc="$(command -v clang || command -v clang-14 || true)"
cxx="$(command -v clang++ || command -v clang++-14 || true)"
if [ -z "$cc" ] || [ -z "$cxx" ]; then
  echo "configure-asan: clang is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DFLASHSERVE_FUZZ=ON -DFLASHSERVE_SANITIZE=ON -DFLASHSERVE_TESTS=ON > /dev/null
echo "$build"
