#!/usr/bin/env bash
# Qwen3 dense runs as a target: `sluice run` on the two Qwen3 fixtures gives transformers' greedy
# tokens for every fixture prompt (tests/fixtures/qwen3_*, made by tools/fixtures/make_qwen3_fixtures.py),
# with drafting off, with prompt lookup and with chunked prefill; a Qwen3 model with a tokenizer runs on text.
# Usage: run_qwen3.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
src=$2
failures=0

# shellcheck source=lib/fixture_cases.sh
source "$(dirname "$0")/lib/fixture_cases.sh"

for fixture in qwen3_a qwen3_b; do
    dir="$src/tests/fixtures/$fixture"
    n=0
    while read -r prompt greedy; do
        n=$((n + 1))
        count=$(echo "$greedy" | tr ',' '\n' | wc -l)
        for extra in "" "--draft ngram --draft-depth 3" "--prefill-chunk 2"; do
            # shellcheck disable=SC2086
            got=$("$sluice" run --model "$dir" --prompt-ids "$prompt" --max-new "$count" --ignore-eos --json $extra | ids)
            if [ "$got" = "$greedy" ]; then
                echo "ok   $fixture prompt $n $extra"
            else
                echo "FAIL $fixture prompt $n $extra: got [$got], want [$greedy]"
                failures=$((failures + 1))
            fi
        done
    done < <(cases "$dir/expected.safetensors")
    if [ "$n" -lt 1 ]; then echo "FAIL $fixture: no prompts"; failures=$((failures + 1)); fi
done

# The trained Qwen3 draft (its own tokenizer.json) runs on text as a target.
out=$("$sluice" run --model "$src/models/default/draft-qwen3" --prompt "In the beginning" --max-new 8 --json)
case "$out" in
    *'"generated_ids":['[0-9]*'"text":'*) echo "ok   default qwen3 draft runs on text as a target" ;;
    *) echo "FAIL default qwen3 draft on text as a target: $out"; failures=$((failures + 1)) ;;
esac

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
