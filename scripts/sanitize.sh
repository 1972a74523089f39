#!/usr/bin/env bash
# Builds test binaries with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan and runs
# them. Usage: scripts/sanitize.sh [TEST_TARGET...]; the default, what CI runs, is every unit test
# of the base, net, protocol, vision, tokenizer and encoding rooms (HTTP sessions, request
# bodies, the picture path, tokenizing and prompt encoding).
# Any sanitizer report fails the test that raised it (UBSan does not recover; ASan checks leaks).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_ASAN_BUILD_DIR:-$here/build-asan}"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then  # every unit test of the rooms below
  for room in base net protocol vision tokenizer encoding; do
    for f in "$here/src/$room"/*_test.cc; do targets+=("$(basename "$f" .cc)"); done
  done
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_SANITIZE=ON > /dev/null
cmake --build "$build" --target "${targets[@]}" -- -j "$(nproc)"
regex="$(printf '\\.%s$|' "${targets[@]}")"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)" -R "${regex%|}"
