#!/usr/bin/env bash
# Nothing allocates per token in the whole generation loop, not only inside the pass: every call of
# the process to the C allocator is counted (tests/alloc_count, LD_PRELOAD) over `sluice run --json`
# on the default model, for 16 and for 80 new tokens; the difference over the 64 extra tokens is
# what one token costs: sampling, stopping, detokenizing, statistics, drafting and the reader's
# per-miss work included. At most 4 per token, resident, drafted and streamed with read misses (a
# cache of a few records, so most tokens read experts). Exits 77 (skipped) where the counting
# library is not built (the sanitizer builds, whose runtimes own the allocator).
# Usage: run_allocations.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
src=$2
lib=$(dirname "$sluice")/tests/libsluice_alloc_count.so
[ -f "$lib" ] || { echo "SKIP: $lib is not built (sanitizer build?)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
limit=4

cp -r "$src/models/default/target" "$work/streamed"
"$sluice" prepare --model "$work/streamed" --home "$work/home" --no-measure >/dev/null 2>&1

count() {  # count NEW ARGS...: allocator calls of one run
  local new=$1
  shift
  # Every run starts from the same state: the heat a streamed run saves would make the next one's
  # load (not its tokens) allocate more.
  rm -f "$work/streamed/sluice-heat.json"
  SLUICE_ALLOC_COUNT_FILE="$work/count" LD_PRELOAD="$lib" "$sluice" run "$@" --prompt "In the beginning God created" \
    --ignore-eos --max-new "$new" --json >"$work/out.json" 2>"$work/err" || { cat "$work/err" >&2; return 1; }
  python3 -c "import json,sys; n = len(json.load(open(sys.argv[1]))['generated_ids']); sys.exit(0 if n == int(sys.argv[2]) else 1)" \
    "$work/out.json" "$new" || { echo "FAIL: the run did not generate $new tokens" >&2; return 1; }
  cat "$work/count"
}

# The streamed arm reads experts on most tokens: its cache holds a few records (checked on a run with
# an events file, which the counted runs do not write).
rm -f "$work/streamed/sluice-heat.json"
"$sluice" run --model "$work/streamed" --cache-gb 0.004 --prompt "In the beginning God created" --ignore-eos \
  --max-new 16 --json --events "$work/events.jsonl" >/dev/null 2>&1
misses=$(tail -1 "$work/events.jsonl" | python3 -c "import json,sys; print(json.load(sys.stdin)['stats']['store']['misses'])")
if [ "$misses" -ge 16 ]; then echo "ok   streamed: $misses expert reads in 16 tokens"; else echo "FAIL streamed: only $misses expert reads"; failures=$((failures + 1)); fi

for mode in resident drafted streamed; do
  case $mode in
    resident) args=(--model "$src/models/default/target" --experts resident) ;;
    drafted) args=(--model "$src/models/default/target" --experts resident --draft "model:$src/models/default/draft" --draft-depth 3) ;;
    streamed) args=(--model "$work/streamed" --cache-gb 0.004) ;;
  esac
  short=$(count 16 "${args[@]}") && long=$(count 80 "${args[@]}") || { echo "FAIL $mode: run failed"; failures=$((failures + 1)); continue; }
  per=$(python3 -c "print('%.2f' % ((int('$long') - int('$short')) / 64))")
  if python3 -c "import sys; sys.exit(0 if float('$per') <= $limit else 1)"; then
    echo "ok   $mode: $per allocations per token ($short for 16 tokens, $long for 80)"
  else
    echo "FAIL $mode: $per allocations per token ($short for 16 tokens, $long for 80; at most $limit)"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || exit 1
