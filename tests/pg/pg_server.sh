#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the tests of the PostgreSQL metering store.
#   pg_server.sh start DIR   initdb + start on a free 127.0.0.1 port; writes DIR/url
#   pg_server.sh stop DIR    stops it and deletes its data
# Without PostgreSQL's server binaries (Debian: postgresql) `start` writes no URL and exits 0:
# the tests that need it then report themselves skipped. As root the server runs as `postgres`.
set -euo pipefail
cmd="${1:-}" dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

bindir() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v pg_ctl)"
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true
}

as_owner() {  # runs a server binary as the data directory's owner (from /: ours may be closed to it)
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

stop() {
  [ -f "$dir/data_dir" ] || return 0
  local data
  data="$(cat "$dir/data_dir")"
  if [ -d "$data" ]; then
    as_owner "$(cat "$dir/bin")/pg_ctl" stop -D "$data" -m immediate -s >/dev/null 2>&1 || true
    rm -rf "$data"
  fi
  rm -f "$dir/data_dir" "$dir/url" "$dir/bin"
}

start() {
  stop  # a server left over from an interrupted run
  local bin
  bin="$(bindir)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "pg_server: no PostgreSQL server binaries (install Debian's postgresql, as scripts/setup.sh does);" \
         "the PostgreSQL store tests will be skipped"
    return 0
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "pg_server: running as root but there is no postgres user to run the server as" >&2
    return 1
  fi
  local data
  data="$(mktemp -d /tmp/flashserve-pg-XXXXXX)"
  [ "$(id -u)" -eq 0 ] && chown postgres "$data"
  echo "$data" >"$dir/data_dir"
  echo "$bin" >"$dir/bin"
  as_owner "$bin/initdb" -D "$data" -U flashserve --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  local port
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 40000))
    if as_owner "$bin/pg_ctl" start -D "$data" -w -t 30 -l "$data/server.log" \
         -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
         >/dev/null 2>&1; then
      echo "postgresql://flashserve@127.0.0.1:$port/postgres" >"$dir/url"
      echo "pg_server: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
      return 0
    fi
  done
  cat "$data/server.log" >&2 || true
  echo "pg_server: could not start PostgreSQL" >&2
  return 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
