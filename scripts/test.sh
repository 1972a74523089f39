#!/usr/bin/env bash
# Builds flashserve and runs every test (unit, integration, end-to-end) with CTest, then lists
# every skipped test case (whole binaries CTest reports as skipped, and single gtest cases).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/build.sh" "$@"
build="${FLASHSERVE_BUILD_DIR:-$here/build}"
rc=0
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" || rc=$?
log="$build/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  skipped="$(sed -n 's/^\[  SKIPPED \] \([A-Za-z_][^ ]*\).*/\1/p' "$log" | sort -u)"
  if [ -n "$skipped" ]; then
    echo "test: $(echo "$skipped" | wc -l) gtest case(s) skipped (reasons in $log):"
    echo "$skipped" | sed 's/^/  /'
  else
    echo "test: no gtest case skipped"
  fi
fi
exit "$rc"
