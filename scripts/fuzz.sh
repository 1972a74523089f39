#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan + UBSan) in build-asan (shared with
# scripts/sanitize.sh) and runs each on a copy of its seed corpus.
# Usage: scripts/fuzz.sh [TOTAL_SECONDS] [TARGET...]; the seconds are shared by the targets (default 60: what CI runs), e.g. scripts/fuzz.sh 7200 for hours.
# Fails on any crash, sanitizer report, hang (10 s per input) or input over 2 GB of memory; the
# input that did it is kept in build-asan/findings/. Needs clang and libclang-rt (scripts/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
total="${1:-60}"
shift || true
build="$("$here/scripts/configure-asan.sh" "${FLASHSERVE_FUZZ_BUILD_DIR:-}")"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for f in "$here"/fuzz/*_fuzz.cc; do targets+=("$(basename "$f" .cc)"); done
fi
cmake --build "$build" --target "${targets[@]}" -- -j "$(nproc)"
per=$(( total / ${#targets[@]} ))
[ "$per" -ge 1 ] || per=1
mkdir -p "$build/findings"
rc=0
for t in "${targets[@]}"; do
  name="${t%_fuzz}"
  work="$(mktemp -d)"
  cp -r "$here/fuzz/corpus/$name/." "$work/"
  dict=()  # the tokens of the input's language, where it has one (fuzz/dict)
  case "$name" in
    http_request) dict=(-dict="$here/fuzz/dict/http.dict") ;;
    chat_request|dialect_request|image_parts|json_schema|model_config|safetensors|trace)
      dict=(-dict="$here/fuzz/dict/json.dict") ;;
  esac
  echo "fuzz: $t for ${per} s ($(ls "$work" | wc -l) seeds${dict:+, $(basename "${dict[0]#-dict=}")})"
  if ! "$build/fuzz/$t" "$work" "${dict[@]}" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/findings/$name-" 2> "$build/findings/$name.log"; then
    echo "fuzz: $t FAILED; input and log in $build/findings/" >&2
    tail -40 "$build/findings/$name.log" >&2
    rc=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build/findings/$name.log" | tail -2 | sed 's/^/  /'
  fi
  rm -rf "$work"
done
exit "$rc"
