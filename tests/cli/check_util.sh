# Shared by the CLI test scripts (sourced): a scratch folder removed on exit, and checks that
# print "ok"/"FAIL" and set fail=1 on a failure.
fail=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2] got [$3]"; fail=1; fi
}
check_fails() {  # check_fails NAME NEEDLE COMMAND...: the command exits non-zero and prints NEEDLE
  local name="$1" needle="$2"
  shift 2
  local out
  if out="$("$@" 2>&1)"; then echo "FAIL $name: exit 0"; fail=1; return; fi
  if [[ "$out" == *"$needle"* ]]; then echo "ok   $name"; else echo "FAIL $name: no '$needle' in: $out"; fail=1; fi
}
