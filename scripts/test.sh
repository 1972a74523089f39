#!/usr/bin/env bash
# Builds flashserve and runs every test (unit, integration, end-to-end) with CTest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/build.sh" "$@"
build="${FLASHSERVE_BUILD_DIR:-$here/build}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
