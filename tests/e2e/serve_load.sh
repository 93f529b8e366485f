#!/usr/bin/env bash
# Bounded load test of `sluice serve` on loopback: rounds of requests from 8 concurrent clients
# (chat and completions, streamed and not, small max_tokens) against --queue 4. Every request must
# get a well-formed answer or a 429, the server must stay up, and its resident memory (VmRSS) must
# not grow from round to round (the prefix cache stays within its budget). Uses Node's built-in fetch (no npm packages).
# Usage: serve_load.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
make_model "$work/tiny" k3
# The prefix cache keeps states of recent requests up to its budget: 2 MB here, full within the
# first round, so that what the rounds measure is growth beyond it.
start_server srv --model "$work/tiny" --model-id tiny --queue 4 --prefix-cache-gb 0.002
SLUICE_URL="$srv_url" SLUICE_PID="$srv_pid" node "$src/tests/e2e/serve/load.mjs" \
  --rounds "${SLUICE_LOAD_ROUNDS:-6}" --requests "${SLUICE_LOAD_REQUESTS:-40}" --clients 8
kill -0 "$srv_pid" || fail "the server died under load"
stop_server "$srv_pid"
