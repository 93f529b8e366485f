#!/usr/bin/env bash
# `sluice run`'s terminal basics on the default tiny model: the prompt from a file (past argv's
# 128 KiB) or stdin, exit status 2 for usage errors and 1 for failed runs, one-line warnings for
# flags that have no effect (and none for a clean command line), a random seed when sampling
# printed by --stats and --json that --seed repeats, --threads and SLUICE_THREADS, prefill progress
# as plain lines when stderr is not a terminal (and none with --no-progress), per-step lines only
# with --stats=verbose, --state-cache restoring a saved prefix. Usage: run_cli.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
model="$2/models/default/target"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failures=$((failures + 1)); }
ids() { python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])'; }

# 1. The prompt from a file and from stdin gives the tokens of the same --prompt.
want=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 8 --json | ids)
printf 'Once upon a time\n' >"$work/prompt.txt"
got=$("$sluice" run --model "$model" --prompt-file "$work/prompt.txt" --max-new 8 --json | ids)
[ "$got" = "$want" ] && ok "--prompt-file (final newline dropped) = --prompt" || bad "--prompt-file: $got, want $want"
got=$(printf 'Once upon a time\n' | "$sluice" run --model "$model" --prompt - --max-new 8 --json | ids)
[ "$got" = "$want" ] && ok "--prompt - (stdin) = --prompt" || bad "--prompt -: $got, want $want"
got=$(printf 'Once upon a time' | "$sluice" run --model "$model" --prompt - --max-new 8 --json | ids)
[ "$got" = "$want" ] && ok "--prompt - without a final newline" || bad "--prompt - without newline: $got"
# 300 KB of text cannot be an argument (argv strings stop at 128 KiB) but is a prompt file: it is
# read and encoded until it no longer fits --max-context.
python3 -c "print('And the LORD said unto Moses, ' * 10000)" >"$work/big.txt"
out=$("$sluice" run --model "$model" --prompt-file "$work/big.txt" --max-context 4096 2>&1 >/dev/null) && rc=0 || rc=$?
case "$rc:$out" in 1:*"the prompt has more than 4095 tokens: --max-context 4096"*) ok "300 KB --prompt-file read whole: $out" ;;
  *) bad "300 KB prompt file: rc=$rc $out" ;; esac

# 2. Exit status: 2 for a wrong command line (CLI11's checks and conflicts found after parsing), 1
# for a run that fails. Either way one line on stderr.
expect_rc() {  # name, status, substring, args...
  local name=$1 want_rc=$2 want=$3
  shift 3
  local out rc=0
  out=$("$sluice" "$@" 2>&1 >/dev/null </dev/null) || rc=$?
  local first=${out%%$'\n'*}
  if [ "$rc" -eq "$want_rc" ] && case "$first" in *"$want"*) true ;; *) false ;; esac; then
    ok "exit $rc, $name: $first"
  else
    bad "$name: exit $rc (want $want_rc), message lacks '$want': $out"
  fi
}
expect_rc "no prompt" 2 "usage error: give exactly one of --prompt TEXT, --prompt-file FILE and --prompt-ids IDS" \
  run --model "$model"
expect_rc "two prompts" 2 "--prompt excludes --prompt-file" run --model "$model" --prompt x --prompt-file "$work/prompt.txt"
expect_rc "--chat on ids" 2 "usage error: --chat needs a text prompt" run --model "$model" --prompt-ids 1,2 --chat
expect_rc "--isa with --device" 2 "usage error: give --isa or --device, not both" \
  run --model "$model" --prompt x --isa scalar --device cpu:avx2
expect_rc "--no-think with --reasoning-effort" 2 "usage error: give --no-think or --reasoning-effort, not both" \
  run --model "$model" --prompt x --chat --no-think --reasoning-effort low
expect_rc "--top-logits without --json" 2 "usage error: --top-logits needs --json" \
  run --model "$model" --prompt-ids 1 --top-logits 3
expect_rc "unknown flag" 2 "--bogus" run --model "$model" --prompt x --bogus
expect_rc "bad --stats level" 2 "--stats: 'loud' is not one of summary, verbose" run --model "$model" --prompt x --stats=loud
expect_rc "--threads 0" 2 "--threads: 0 is outside 1..4096" run --model "$model" --prompt x --threads 0
expect_rc "chat without a model" 2 "--model is required" chat
expect_rc "missing prompt file" 1 "sluice: error: --prompt-file $work/nope.txt: cannot open: No such file" \
  run --model "$model" --prompt-file "$work/nope.txt"
: >"$work/empty.txt"
expect_rc "empty prompt file" 1 "sluice: error: --prompt-file $work/empty.txt: the prompt is empty" \
  run --model "$model" --prompt-file "$work/empty.txt"
expect_rc "missing model" 1 "sluice: error: $work/none/config.json" run --model "$work/none" --prompt x
expect_rc "chat on a model without a chat format" 2 "usage error: " chat --model "$2/models/default/draft-qwen3"

# 3. Warnings: one line each for flags that do nothing here; none for a clean command line.
warnings() { "$sluice" run --model "$model" --max-new 1 "$@" 2>&1 >/dev/null | grep '^sluice: warning: ' || true; }
expect_warning() {  # name, line, args...
  local name=$1 want=$2
  shift 2
  local got
  got=$(warnings "$@")
  if printf '%s\n' "$got" | grep -Fxq -- "sluice: warning: $want"; then ok "warning, $name: $want"; else bad "$name: warnings [$got], want '$want'"; fi
}
expect_warning "sampling flags when greedy" "--top-k and --top-p have no effect at --temperature 0 (greedy decoding)" \
  --prompt x --top-k 5 --top-p 0.9
expect_warning "--seed when greedy" "--seed has no effect at --temperature 0 (greedy decoding)" --prompt x --seed 7
expect_warning "--no-think without --chat" "--no-think has no effect without --chat" --prompt x --no-think
expect_warning "--system without --chat" "--system has no effect without --chat" --prompt x --system hi
expect_warning "drafting flags without a drafter" "--draft-max and --draft-depth have no effect with --draft off" \
  --prompt x --draft-max 4 --draft-depth 2
expect_warning "--draft-max with --draft-depth" \
  "--draft-max has no effect with --draft-depth (a fixed depth bypasses the controller)" \
  --prompt x --draft ngram --draft-max 4 --draft-depth 2
expect_warning "--prefill-memory-gb with --prefill-chunk" \
  "--prefill-memory-gb has no effect with --prefill-chunk (the chunk is given)" --prompt x --prefill-chunk 4 --prefill-memory-gb 1
expect_warning "streaming flags on resident experts" \
  "--cache-gb, --reader and --no-verify have no effect: the routed experts are not streamed (no \`sluice prepare\` manifest, --experts resident, or a model without routed experts)" \
  --prompt x --cache-gb 2 --reader pread --no-verify
got=$(SLUICE_THREADS=lots warnings --prompt x)
case "$got" in "sluice: warning: SLUICE_THREADS='lots' is not an integer in 1..4096;"*) ok "warning, malformed SLUICE_THREADS: $got" ;;
  *) bad "malformed SLUICE_THREADS: [$got]" ;; esac
clean=$("$sluice" run --model "$model" --prompt x --max-new 2 --temperature 0.8 --top-k 5 --top-p 0.9 --seed 1 --chat \
  --no-think 2>&1 >/dev/null)
[ -z "$clean" ] && ok "no warning and nothing on stderr for flags that all take effect" || bad "clean command line: [$clean]"

# 4. A random seed when sampling: printed by --stats and --json; --seed repeats the run exactly.
run_json() { "$sluice" run --model "$model" --prompt "Once upon a time" --max-new 12 --temperature 1 --json "$@"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }
a=$(run_json)
b=$(run_json)
seed_a=$(field seed <<<"$a")
seed_b=$(field seed <<<"$b")
[ "$seed_a" != "$seed_b" ] && ok "two sampled runs drew seeds $seed_a and $seed_b" || bad "the same seed twice: $seed_a"
again=$(run_json --seed "$seed_a")
[ "$(ids <<<"$again")" = "$(ids <<<"$a")" ] && [ "$(field seed <<<"$again")" = "$seed_a" ] &&
  ok "--seed $seed_a repeats the sampled tokens" || bad "--seed $seed_a: $(ids <<<"$again") vs $(ids <<<"$a")"
err=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 4 --temperature 1 --stats 2>&1 >/dev/null)
case "$err" in *"[stats] seed="[0-9]*" (drawn at random; --seed repeats this run)"*) ok "--stats prints the drawn seed" ;;
  *) bad "--stats lacks the seed: $err" ;; esac
err=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 4 --stats 2>&1 >/dev/null)
case "$err" in *"seed="*) bad "--stats prints a seed for a greedy run: $err" ;; *) ok "no seed line when greedy" ;; esac
greedy=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 4 --json)
case "$greedy" in *'"seed"'*) bad "--json has a seed for a greedy run" ;; *) ok "--json has no seed when greedy" ;; esac

# 5. --threads N sets the compute threads (over SLUICE_THREADS); the tokens do not change.
threads_of() { "$@" --max-new 4 --stats 2>&1 >/dev/null | sed -n 's/^\[stats\] prompt=.* threads=\([0-9]*\)$/\1/p'; }
t=$(threads_of "$sluice" run --model "$model" --prompt-ids 1,2,3 --threads 3)
[ "$t" = 3 ] && ok "--threads 3: threads=3" || bad "--threads 3 gave threads=$t"
t=$(SLUICE_THREADS=2 threads_of "$sluice" run --model "$model" --prompt-ids 1,2,3)
[ "$t" = 2 ] && ok "SLUICE_THREADS=2: threads=2" || bad "SLUICE_THREADS=2 gave threads=$t"
t=$(SLUICE_THREADS=2 threads_of "$sluice" run --model "$model" --prompt-ids 1,2,3 --threads 1)
[ "$t" = 1 ] && ok "--threads 1 wins over SLUICE_THREADS=2" || bad "--threads 1 with SLUICE_THREADS=2 gave threads=$t"
one=$("$sluice" run --model "$model" --prompt-ids 1,2,3 --max-new 8 --threads 1 --json | ids)
[ "$one" = "$("$sluice" run --model "$model" --prompt-ids 1,2,3 --max-new 8 --json | ids)" ] &&
  ok "--threads 1 gives the same tokens" || bad "--threads 1 changed the tokens"

# 6. Prefill progress when stderr is a file: plain lines, no carriage returns; none with --no-progress.
# Progress shows once a prefill has run a second: the prompt grows until its prefill takes 1.5 s
# (1,500 words take 1.5-4.5 s on the 2-core machine), so a faster machine still sees it.
long_prompt() {  # words, file
  python3 -c "
import random, sys
random.seed(1)
w = 'the lord said unto moses and behold i will go up make thee a burnt offering priest altar'.split()
print(' '.join(random.choice(w) for _ in range(int(sys.argv[1]))))" "$1" >"$2"
}
prefill_ms() { sed -n 's/^\[stats\] prompt=[0-9]* cached=[0-9]* generated=[0-9]* prefill=\([0-9]*\).*/\1/p' "$1"; }
for words in 1500 6000 24000; do
  long_prompt "$words" "$work/long.txt"
  "$sluice" run --model "$model" --prompt-file "$work/long.txt" --prefill-chunk 64 --max-new 1 --stats \
    2>"$work/progress.txt" >/dev/null
  ms=$(prefill_ms "$work/progress.txt")
  grep -q '^sluice: prefill ' "$work/progress.txt" || [ "$ms" -ge 1500 ] || continue
  if grep -Eq '^sluice: prefill [0-9]+/[0-9]+ tokens \([0-9]+%\)' "$work/progress.txt" &&
    grep -Eq '^sluice: prefill ([0-9]+)/\1 tokens in [0-9.]+ s \([0-9]+ tok/s\)$' "$work/progress.txt" &&
    ! grep -q $'\r' "$work/progress.txt"; then
    ok "prefill progress as plain lines ($ms ms): $(grep -m 1 '^sluice: prefill' "$work/progress.txt") ... $(grep '^sluice: prefill' "$work/progress.txt" | tail -n 1)"
  else
    bad "prefill progress to a file ($ms ms): $(cat -A "$work/progress.txt")"
  fi
  break
done
"$sluice" run --model "$model" --prompt-file "$work/long.txt" --prefill-chunk 64 --max-new 1 --no-progress \
  2>"$work/quiet.txt" >/dev/null
[ ! -s "$work/quiet.txt" ] && ok "--no-progress: nothing on stderr" || bad "--no-progress: $(cat "$work/quiet.txt")"

# 7. --stats is a short summary; --stats=verbose adds a line per decode step.
summary=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 6 --draft ngram --stats 2>&1 >/dev/null)
verbose=$("$sluice" run --model "$model" --prompt "Once upon a time" --max-new 6 --draft ngram --stats=verbose 2>&1 >/dev/null)
n_summary=$(grep -c '^\[draft\] ' <<<"$summary" || true)
n_verbose=$(grep -c '^\[draft\] ' <<<"$verbose" || true)
[ "$n_summary" -eq 1 ] && [ "$n_verbose" -eq 6 ] &&
  ok "--stats: 1 drafting line (the totals); --stats=verbose: 5 per-step lines and the totals" ||
  bad "drafting lines: $n_summary with --stats, $n_verbose with --stats=verbose"
steps=$("$sluice" run --model "$model" --prompt-ids 1,2,3 --max-new 4 --stats verbose 2>&1 >/dev/null | grep -c '^\[step\] ' || true)
[ "$steps" -eq 3 ] && ok "--stats verbose without a drafter: 3 step lines" || bad "--stats verbose without a drafter: $steps step lines"

# 8. --state-cache on run: a second run of a longer prompt that starts with the first run's prompt
# and reply restores that state (cached_tokens > 0, said by --stats) and gives the ids of a run
# without the cache.
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
first=$("$sluice" run --model "$model" --prompt-ids 5,6,7,8,9,10,11,12 --max-new 6 --ignore-eos --json --state-cache "$work/sc")
ext="5,6,7,8,9,10,11,12,$(field generated_ids <<<"$first" | tr -d '[] '),40,41"
cold=$("$sluice" run --model "$model" --prompt-ids "$ext" --max-new 6 --ignore-eos --json)
warm=$("$sluice" run --model "$model" --prompt-ids "$ext" --max-new 6 --ignore-eos --json --state-cache "$work/sc")
cached=$(field cached_tokens <<<"$warm")
[ "$(ids <<<"$warm")" = "$(ids <<<"$cold")" ] && [ "$cached" -gt 0 ] &&
  ok "run --state-cache: $cached of $(tr ',' '\n' <<<"$ext" | wc -l) prompt tokens restored, same ids as without the cache" ||
  bad "run --state-cache: cached $cached, ids $(ids <<<"$warm") vs $(ids <<<"$cold")"
line=$("$sluice" run --model "$model" --prompt-ids "$ext" --max-new 2 --ignore-eos --stats --state-cache "$work/sc" 2>&1 >/dev/null | grep '^\[stats\]')
grep -q "cached=[1-9]" <<<"$line" && ok "--stats says the restored tokens: ${line%% generated=*}" || bad "--stats: $line"

# 9. `sluice chat` on piped lines: /think off makes the next reply answer without reasoning (the
# reasoning is marked by a "--- reasoning ---" line when stdout is not a terminal); an effort the
# format refuses leaves the setting as it was.
out=$(printf 'Hello\n/think off\nHello again\n/think medium\n/think\n' |
      "$sluice" chat --model "$model" --max-tokens 6 --temperature 0 --no-progress 2>/dev/null)
reasoned=$(grep -c -- '--- reasoning ---' <<<"$out" || true)
if [ "$reasoned" = 1 ] && grep -q "(thinking: off, from the next reply on)" <<<"$out" &&
   grep -q "error: .*thinking efforts are low, high and max.* (thinking stays off)" <<<"$out" &&
   grep -q "^(thinking: off)$" <<<"$out"; then
  ok "chat /think off: the first reply reasons, the second does not; a refused effort changes nothing"
else
  bad "chat /think: $reasoned reasoning blocks in: $out"
fi

if [ "$failures" -ne 0 ]; then
  echo "run_cli: $failures failure(s)"
  exit 1
fi
echo "run_cli: all checks passed"
