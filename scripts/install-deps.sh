#!/usr/bin/env bash
# Installs the Debian packages sluice builds and tests with, only those missing.
# Idempotent; runs apt-get directly as root and through sudo otherwise.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libpcre2-dev liburing-dev libxxhash-dev
  libcurl4-openssl-dev libcpp-httplib-dev libssl-dev
  clang libclang-rt-14-dev python3
  python3-jsonschema  # the independent JSON Schema validator of the guided-decoding tests (tools/guide_schema_check.py)
  xz-utils util-linux
  librsvg2-bin  # rsvg-convert: PNG copies of the `sluice bench` SVG charts (optional for them)
  e2fsprogs mount  # mkfs.ext4, losetup: scripts/loop-drives.sh (emulated drives)
  curl  # raw-HTTP end-to-end tests of `sluice serve` (tests/e2e/serve_http.sh)
  strace  # kills at chosen system calls: tests/e2e/crash_kill.sh
  chromium  # headless browser for the web chat's end-to-end test (tests/e2e/serve_web.sh)
  tmux  # drives `sluice chat` in a terminal: tests/e2e/chat_tmux.sh
)
# npm fetches the tokenizer test data; any npm on PATH will do (it may not come from apt).
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
