#!/usr/bin/env bash
# Builds test binaries with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan and runs
# them. Usage: scripts/sanitize.sh [TEST_TARGET...]; the default is the picture path (decoders,
# sources, fetches, every dialect's picture parts) and the HTTP sessions' shutdown, what CI runs.
# Any sanitizer report fails the test that raised it (UBSan does not recover; ASan checks leaks).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_ASAN_BUILD_DIR:-$here/build-asan}"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(vision_test fetch_test image_parts_test http_session_test)
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_SANITIZE=ON > /dev/null
cmake --build "$build" --target "${targets[@]}" -- -j "$(nproc)"
regex="$(printf '\\.%s$|' "${targets[@]}")"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)" -R "${regex%|}"
