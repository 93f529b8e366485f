#!/usr/bin/env bash
# The MoE architectures of issue 17 through the real binary: `sluice run` on each tiny checkpoint
# (qwen3_moe, gpt_oss with MXFP4 experts, deepseek_v3 with FP8 weights, kimi_k2, and kimi_k2 with
# Kimi-K2-Thinking's INT4 experts) gives transformers' greedy tokens for every fixture prompt
# (tools/fixtures/make_moe_fixtures.py) with the experts resident, with prompt lookup drafting, with
# chunked prefill, and streamed by `sluice prepare` from two homes (records whole or striped) through a cache far smaller than
# one layer's experts.
# Usage: run_moe.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# shellcheck source=lib/fixture_cases.sh
source "$(dirname "$0")/lib/fixture_cases.sh"
check() {  # check LABEL GOT WANT
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got [$2], want [$3]"; failures=$((failures + 1)); fi
}

for fixture in qwen3_moe_a qwen3_moe_b gpt_oss_a gpt_oss_b deepseek_v3_a kimi_k2_b kimi_k2_int4; do
    model="$work/$fixture"
    cp -r "$src/tests/fixtures/$fixture" "$model"
    rm -f "$model/expected.safetensors"
    # Two homes; a cache of about 3 expert records (every layer evicts). The second fixture of
    # each family (and the INT4 one) has every record striped across both homes.
    stripe=off
    case "$fixture" in *_b | *int4) stripe=on ;; esac
    "$sluice" prepare --model "$model" --home "$work/$fixture.h0" --home "$work/$fixture.h1" --no-measure \
        --stripe "$stripe" >/dev/null 2>&1 || { echo "FAIL $fixture: prepare"; failures=$((failures + 1)); continue; }
    parts=$(python3 -c "import json,sys; print(len([l for l in json.load(open(sys.argv[1]))['layers'] if l][0][0]))" \
        "$model/sluice-manifest.json")
    check "$fixture: holders of a record with --stripe $stripe" "$parts" "$([ "$stripe" = on ] && echo 2 || echo 1)"
    cache=$(python3 -c "import json,sys; print('%.9f' % (3 * json.load(open(sys.argv[1]))['slot_bytes'] / 1e9))" \
        "$model/sluice-manifest.json")
    n=0
    while read -r prompt greedy; do
        n=$((n + 1))
        count=$(echo "$greedy" | tr ',' '\n' | wc -l)
        for extra in "--experts resident" "--experts resident --draft ngram --draft-depth 3" \
            "--experts resident --prefill-chunk 3" "--experts stream --cache-gb $cache" \
            "--experts stream --cache-gb $cache --draft ngram --draft-depth 2"; do
            # shellcheck disable=SC2086
            got=$("$sluice" run --model "$model" --prompt-ids "$prompt" --max-new "$count" --ignore-eos --json $extra | ids)
            check "$fixture prompt $n $extra" "$got" "$greedy"
        done
    done < <(cases "$src/tests/fixtures/$fixture/expected.safetensors")
    if [ "$n" -lt 2 ]; then echo "FAIL $fixture: $n prompts"; failures=$((failures + 1)); fi
done

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "run_moe: all ok"
