#!/usr/bin/env bash
# End-to-end: `sluice serve` driven by the official OpenAI client (npm package `openai`, v6) on a
# tiny random model: chat and completions, streaming and not, reasoning split, tools round trip,
# stop sequences, seeds, state reuse, and the client's typed errors. The package is installed with
# npm into build/serve-e2e (or $SLUICE_NPM_CACHE/serve-e2e); prints SKIP and exits 77 (skipped) when npm or the
# registry is unavailable.
# Usage: serve_openai.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/lib/npm_deps.sh"
npm_deps serve-e2e "$src/tests/e2e/serve/package.json" openai
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
make_model "$work/tiny" k3
start_server srv --model "$work/tiny" --model-id tiny --queue 1 --api-key test-key
SLUICE_URL="$srv_url/v1" SLUICE_KEY=test-key SLUICE_OPENAI_DIR="$deps" \
  node --test --test-reporter=spec "$src/tests/e2e/serve/openai.test.mjs"
stop_server "$srv_pid"
