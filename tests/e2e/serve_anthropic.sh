#!/usr/bin/env bash
# End-to-end: `sluice serve`'s POST /v1/messages driven by the official Anthropic client (npm
# package `@anthropic-ai/sdk`) on a tiny random model: the message shape, streams (raw events and
# the client's accumulated message), thinking on and off, system prompts, tools and a
# tool_use/tool_result round trip, stop sequences, kept state as cache_read_input_tokens, and the
# client's typed errors (400, 401, 404, 529 beyond the line). The package is installed with npm into
# build/serve-anthropic-e2e (or $SLUICE_NPM_CACHE/serve-anthropic-e2e); prints SKIP and exits 77 (skipped) when
# npm or the registry is unavailable.
# Usage: serve_anthropic.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/lib/npm_deps.sh"
npm_deps serve-anthropic-e2e "$src/tests/e2e/serve/anthropic/package.json" @anthropic-ai/sdk
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
make_model "$work/tiny" k3
start_server srv --model "$work/tiny" --model-id tiny --queue 1 --api-key test-key
SLUICE_URL="$srv_url" SLUICE_KEY=test-key SLUICE_ANTHROPIC_DIR="$deps" \
  node --test --test-reporter=spec "$src/tests/e2e/serve/anthropic/anthropic.test.mjs"
stop_server "$srv_pid"
