#!/usr/bin/env bash
# End-to-end: `sluice setup` from a local directory source (--full and --stream), `run --json`
# generations equal to the source model's, `run --router-trace` + `warm`, `verify`, `upgrade`,
# and one-line errors for bad arguments. (HTTP, faults and resume: tests/unit/fetch_setup_test.cpp.)
set -euo pipefail
sluice="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "setup_cli: FAIL: $*" >&2; exit 1; }

"$sluice" make-tiny --out "$work/src" --experts 16 --seed 9 >/dev/null 2>&1
want="$("$sluice" run --model "$work/src" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json --experts resident | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')"

"$sluice" setup --source "$work/src" --model "$work/full" --full --home "$work/full-home" --no-measure --quiet
got="$("$sluice" run --model "$work/full" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')"
[ "$got" = "$want" ] || fail "full install generated $got, source model $want"

# A complete install needs its source no more.
mv "$work/src" "$work/src.away"
got="$("$sluice" run --model "$work/full" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')"
[ "$got" = "$want" ] || fail "full install without its source generated $got"
mv "$work/src.away" "$work/src"

"$sluice" setup --source "$work/src" --model "$work/stream" --stream --home "$work/stream-home" --quiet
got="$("$sluice" run --model "$work/stream" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json --router-trace "$work/trace.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')"
[ "$got" = "$want" ] || fail "stream install generated $got, source model $want"
head -1 "$work/trace.jsonl" | grep -q sluice-router-trace || fail "router trace has no header line"
"$sluice" run --model "$work/stream" --prompt-ids 4,5,6 --max-new 2 --stats 2>"$work/stats.txt" >/dev/null
grep -q "experts still missing locally" "$work/stats.txt" || fail "--stats does not report missing experts"

"$sluice" setup --source "$work/src" --model "$work/stream2" --stream --home "$work/stream2-home" --quiet
grep -q " 0 local" <<<"$("$sluice" warm --model "$work/stream2" --trace "$work/trace.jsonl")" || fail "warm plan of a fresh install"
grep -q "fetched 4" <<<"$("$sluice" warm --model "$work/stream2" --trace "$work/trace.jsonl" --fetch 4 2>/dev/null)" || fail "warm --fetch 4"

"$sluice" verify --model "$work/full" 2>/dev/null || fail "verify of a good full install"
"$sluice" verify --model "$work/stream" 2>/dev/null || fail "verify of a good stream install"
printf 'x' | dd of="$work/full/model-00002-of-00002.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
if "$sluice" verify --model "$work/full" 2>"$work/verify.txt"; then fail "verify accepted a damaged shard"; fi
grep -q "SHA-256" "$work/verify.txt" || fail "verify does not name the checksum problem"
"$sluice" verify --model "$work/full" --repair 2>/dev/null || fail "verify --repair"
cmp -s "$work/full/model-00002-of-00002.safetensors" "$work/src/model-00002-of-00002.safetensors" || fail "repair did not restore the shard"

grep -q "already at manifest version" <<<"$("$sluice" upgrade --model "$work/full" 2>&1)" || fail "upgrade of a current install"
if "$sluice" setup --source "$work/nowhere" --model "$work/x" --full 2>"$work/err.txt"; then fail "setup from a missing dir"; fi
[ "$(wc -l <"$work/err.txt")" -eq 1 ] || fail "error is not one line: $(cat "$work/err.txt")"
# Setup of another model into an installed directory (or onto its home) is refused before anything
# is written: the install stays whole, verifiable and runnable.
"$sluice" make-tiny --out "$work/other" --experts 8 --seed 4 >/dev/null 2>&1
cp -a "$work/full" "$work/full.before"
if "$sluice" setup --source "$work/other" --model "$work/full" --full --home "$work/full-home" --no-measure --quiet 2>"$work/err.txt"; then
  fail "setup of another model into an installed directory"
fi
[ "$(wc -l <"$work/err.txt")" -eq 1 ] || fail "error is not one line: $(cat "$work/err.txt")"
grep -q "holds another model" "$work/err.txt" || fail "refusal does not say why: $(cat "$work/err.txt")"
diff -r "$work/full.before" "$work/full" >/dev/null || fail "a refused setup changed the installed directory"
"$sluice" verify --model "$work/full" 2>/dev/null || fail "verify after a refused setup"
got="$("$sluice" run --model "$work/full" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')"
[ "$got" = "$want" ] || fail "the install after a refused setup generated $got"
if "$sluice" setup --source "$work/other" --model "$work/fresh" --full --home "$work/full-home" --no-measure --quiet 2>"$work/err.txt"; then
  fail "setup of another model onto a home in use"
fi
grep -q "already holds the experts of another model" "$work/err.txt" || fail "home refusal: $(cat "$work/err.txt")"
[ ! -e "$work/fresh" ] || fail "a refused setup created $work/fresh: $(ls "$work/fresh")"
echo "setup_cli: ok"
