#!/usr/bin/env bash
# `sluice run --draft dspark:DIR` gives the tokens of `--draft off` (fixed depths and the
# controller, raw ids and chunked prefill), and a bad drafter directory is a one-line error.
# Usage: run_dspark.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

"$sluice" make-tiny --arch kimi_k3 --out "$work/target" --seed 5 --dspark "$work/ds" 2>/dev/null
ids() { sed -n 's/.*"generated_ids":\[\([0-9,]*\)\].*/\1/p'; }

for prompt in 1,2,3 7,300,41,41,12,9,88,500,3,77,61,2 5; do
    for extra in "" "--prefill-chunk 3"; do
        # shellcheck disable=SC2086
        want=$("$sluice" run --model "$work/target" --prompt-ids "$prompt" --max-new 20 --ignore-eos --json $extra | ids)
        for draft in "--draft-depth 1" "--draft-depth 4" "--draft-max 7"; do
            # shellcheck disable=SC2086
            got=$("$sluice" run --model "$work/target" --prompt-ids "$prompt" --max-new 20 --ignore-eos --json $extra \
                  --draft "dspark:$work/ds" $draft | ids)
            if [ -n "$want" ] && [ "$got" = "$want" ]; then
                echo "ok   prompt $prompt $extra $draft"
            else
                echo "FAIL prompt $prompt $extra $draft: got [$got], want [$want]"
                failures=$((failures + 1))
            fi
        done
    done
done

# A drafter for another target is refused in one line that names the field.
"$sluice" make-tiny --arch kimi_k3 --out "$work/other" --hidden 96 --dspark "$work/ds96" 2>/dev/null
rc=0
out=$("$sluice" run --model "$work/target" --prompt-ids 1,2 --max-new 2 --draft "dspark:$work/ds96" 2>&1 >/dev/null) || rc=$?
case "$rc:$out" in
    "1:sluice: error: "*"hidden_size 96 differs from the target's 64"*) echo "ok   mismatched drafter: $out" ;;
    *) echo "FAIL mismatched drafter (exit $rc): $out"; failures=$((failures + 1)) ;;
esac

if [ $failures -gt 0 ]; then echo "$failures failures"; exit 1; fi
echo "run_dspark: all passed"
