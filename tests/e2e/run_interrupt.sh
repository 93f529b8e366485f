#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM during `sluice run` on the default tiny model: the run stops in the
# middle of a long prefill (between layers) or of decoding, prints what it generated (with --json
# the partial object, stop_reason "cancelled") and exits 130. Usage: run_interrupt.sh <sluice> <source-dir>
set -euo pipefail
# Job control on: background jobs of a script otherwise start with SIGINT ignored (and sluice
# leaves an ignored signal ignored).
set -m
sluice=$1
model="$2/models/default/target"
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "run_interrupt: FAIL: $*" >&2; exit 1; }

# Waits (up to 120 s) until the event log $1 has a line with event $2.
wait_event() {
  for _ in $(seq 1200); do
    grep -q "\"event\":\"$2\"" "$1" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Signal $1 while run is at event $2; the rest are run's arguments. Sets rc, leaves out.json/err.txt.
interrupt_run() {
  local sig=$1 at=$2
  shift 2
  rm -f "$work/events.jsonl"
  "$sluice" run --model "$model" --events "$work/events.jsonl" "$@" >"$work/out.json" 2>"$work/err.txt" &
  pid=$!
  wait_event "$work/events.jsonl" "$at" || fail "run never reached $at: $(cat "$work/err.txt")"
  sleep 0.5
  kill "-$sig" "$pid"
  rc=0
  wait "$pid" || rc=$?
  pid=
}

field() { python3 -c "import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(len(v) if isinstance(v, list) else v)" "$@"; }

# 1. During prefill: 6000 prompt positions take many seconds (a full run of 8000 takes ~40 s);
# with one prefill chunk the signal lands inside a pass, so only the per-layer check can stop it.
ids=$(python3 -c "print(','.join(str((i * 37 + 11) % 500) for i in range(6000)))")
start=$(date +%s)
interrupt_run INT run_start --prompt-ids "$ids" --max-new 4 --json
[ "$rc" -eq 130 ] || fail "SIGINT during prefill: exit $rc (want 130): $(cat "$work/err.txt")"
[ "$(field "$work/out.json" stop_reason)" = cancelled ] || fail "prefill: stop_reason is not cancelled: $(cat "$work/out.json")"
[ "$(field "$work/out.json" generated_ids)" -eq 0 ] || fail "prefill: tokens generated before the prompt was read"
[ "$(field "$work/out.json" prompt_ids)" -eq 6000 ] || fail "prefill: partial object lacks the prompt"
grep -q "interrupted by SIGINT after 0 generated tokens" "$work/err.txt" || fail "prefill: no interruption line: $(cat "$work/err.txt")"
if grep -q prefill_done "$work/events.jsonl"; then fail "prefill completed before stopping"; fi
echo "ok   SIGINT during prefill: exit 130 after $(( $(date +%s) - start )) s, $(cat "$work/err.txt")"

# 2. During decoding (text out): what was printed stays printed, exit 130.
interrupt_run INT decode_step --prompt "Once upon a time" --max-new 1000000 --ignore-eos
[ "$rc" -eq 130 ] || fail "SIGINT during decoding: exit $rc (want 130): $(cat "$work/err.txt")"
[ -s "$work/out.json" ] || fail "decoding: nothing printed"
n=$(grep -c '"event":"decode_step"' "$work/events.jsonl")
grep -q "interrupted by SIGINT after" "$work/err.txt" || fail "decoding: no interruption line: $(cat "$work/err.txt")"
grep -q '"status":"interrupted"' "$work/events.jsonl" || fail "decoding: run_end does not say interrupted"
echo "ok   SIGINT during decoding: exit 130 after $n decode steps, $(wc -c <"$work/out.json") bytes of text"

# 3. SIGTERM during decoding with --json: the partial object holds every token decided.
interrupt_run TERM decode_step --prompt-ids 1,2,3 --max-new 1000000 --ignore-eos --json
[ "$rc" -eq 130 ] || fail "SIGTERM during decoding: exit $rc (want 130): $(cat "$work/err.txt")"
got=$(field "$work/out.json" generated_ids)
[ "$got" -ge 1 ] || fail "SIGTERM: no generated ids in the partial object"
[ "$(field "$work/out.json" stop_reason)" = cancelled ] || fail "SIGTERM: stop_reason is not cancelled"
grep -q "interrupted by SIGTERM after $got generated tokens" "$work/err.txt" || fail "SIGTERM: $(cat "$work/err.txt")"
# The partial ids are the model's: a fresh run of that many tokens gives the same ones.
want=$("$sluice" run --model "$model" --prompt-ids 1,2,3 --max-new "$got" --ignore-eos --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "$work/out.json")" = "$want" ] ||
  fail "SIGTERM: partial ids differ from an uninterrupted run of $got tokens"
echo "ok   SIGTERM during decoding with --json: $got tokens, equal to an uninterrupted run"
echo "run_interrupt: ok"
