#!/usr/bin/env bash
# Configures and builds flashserve into build/ (CMake + Ninja + ccache). Extra arguments are
# passed to CMake, e.g. ./scripts/build.sh -DFLASHSERVE_SANITIZE=ON
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$here/build}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${FLASHSERVE_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
