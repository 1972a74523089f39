#!/usr/bin/env bash
# Builds test binaries under sanitizers and runs them. Usage:
#   scripts/sanitize.sh [--thread] [--ci] [TEST_TARGET...]
# Without --thread: AddressSanitizer + UndefinedBehaviorSanitizer in build-asan (clang, shared
# with the fuzz targets: scripts/configure-asan.sh), by default over
# every unit test of the rooms that take outside input (HTTP sessions, request bodies, pictures,
# tokenizing, prompt encoding, grammars, KV files and transfer frames, routing, metering, the
# serving loop).
# With --thread: ThreadSanitizer in build-tsan, by default over the concurrent rooms (the KV
# store, transfers, the serving loop and the router). CI runs both with --ci, which leaves the
# serve room out: it builds the engine under the sanitizer (about 160 heavy objects on two
# cores) and its tests take 2.5 minutes under ASan and 9 under TSan; run it without --ci.
# Any sanitizer report fails the test that raised it (UBSan does not recover; ASan checks leaks).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=address
ci=0
while [ "${1:-}" = "--thread" ] || [ "${1:-}" = "--ci" ]; do
  if [ "$1" = "--thread" ]; then mode=thread; else ci=1; fi
  shift
done
targets=("$@")
if [ "$mode" = thread ]; then
  build="${FLASHSERVE_TSAN_BUILD_DIR:-$here/build-tsan}"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_TSAN=ON > /dev/null
  rooms=(kvstore transfer serve router meter)
else
  build="$("$here/scripts/configure-asan.sh")"
  rooms=(base net protocol vision tokenizer encoding dialect api grammar kvstore kv transfer router sched sampler meter serve)
fi
if [ "${#targets[@]}" -eq 0 ]; then  # every unit test of the rooms above
  for room in "${rooms[@]}"; do
    if [ "$ci" = 1 ] && [ "$room" = serve ]; then continue; fi
    for f in "$here/src/$room"/*_test.cc; do targets+=("$(basename "$f" .cc)"); done
  done
fi
cmake --build "$build" --target "${targets[@]}" -- -j "$(nproc)"
regex="$(printf '\\.%s$|' "${targets[@]}")"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)" -R "${regex%|}"
