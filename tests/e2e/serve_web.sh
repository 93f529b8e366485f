#!/usr/bin/env bash
# End-to-end: the web chat `sluice serve` shows at `/`, in headless Chromium (Debian's `chromium`,
# which scripts/install-deps.sh installs, driven by the npm package playwright-core): the page asks
# for the API key, streams a reply through the OpenAI and the Anthropic route (reasoning folded, the
# reply's stats shown), the stop button ends a long reply and its generation, and the live panel's
# charts fill from GET /v1/telemetry, with two drives read by a model prepared for streaming.
# SLUICE_WEB_SCREENSHOT=FILE keeps a screenshot (docs/web-chat.png is one). Prints SKIP and exits 77 (skipped)
# without chromium, node/npm or the npm registry.
# Usage: serve_web.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
chromium=${SLUICE_CHROMIUM:-$(command -v chromium || true)}
[ -n "$chromium" ] || { echo "SKIP: chromium not installed (scripts/install-deps.sh installs Debian's chromium)"; exit 77; }
source "$src/tests/e2e/lib/npm_deps.sh"
npm_deps serve-web-e2e "$src/tests/e2e/serve/web/package.json" playwright-core
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
make_model "$work/tiny" k3
# Experts streamed from two homes through a cache of a few records, so the drive chart has reads.
"$sluice" prepare --model "$work/tiny" --home "$work/drive0" --home "$work/drive1" --no-measure >/dev/null 2>&1 ||
  fail "prepare"
start_server srv --model "$work/tiny" --model-id tiny-k3 --api-key web-key --experts stream --cache-gb 0.0002 \
  --telemetry-streams 2
SLUICE_URL="$srv_url" SLUICE_KEY=web-key SLUICE_WEB_DIR="$deps" SLUICE_CHROMIUM="$chromium" \
  SLUICE_WEB_SCREENSHOT="${SLUICE_WEB_SCREENSHOT:-$work/web-chat.png}" \
  node --test --test-reporter=spec "$src/tests/e2e/serve/web/web.test.mjs"
# Telemetry streams are capped: the page's own stream has ended with it, so two fit and a third is refused.
stop_server "$srv_pid"
