#!/usr/bin/env bash
# Long-context prefill on the CPU against its FLOP floor, measured in the same run (issue 14, scope
# 6). For each prompt length: the prefill's time, and its FLOP count as the device counted it
# (`sluice run --json`'s prefill_flops: products, attention, recurrences); the floor is that count
# over the CPU's fp32 multiply-add peak on as many threads (kernels_bench's fma_peak and
# muladd_peak, the fastest reading before and after the prefills). An engine without
# prefill_flops prints its times only. One line per length:
#   tokens prefill-s tok/s GFLOP GFLOP/s floor-s ratio
# ratio = prefill time / floor (1 would be every core doing nothing but multiply-adds the whole time).
# Usage: bench/prefill_long.sh <build-dir> [model-dir] [lengths...]
set -euo pipefail
build=${1:-build/release}
model=${2:-models/default/target}
shift $(( $# >= 2 ? 2 : $# ))
lengths=${*:-1024 4096 16384}
sluice="$build/sluice"
threads=${SLUICE_THREADS:-$(nproc)}
peak() {  # multiply-add FLOP/s of $threads threads: the fastest of 10 readings each of the fused
  # (FMA) and unfused (multiply, then add: the exact kernels' form) chains, whichever is faster here
  # (noise only slows a run down)
  local out="$work/peak.json"
  "$build/bench/kernels_bench" --benchmark_filter="(fma|muladd)_peak/avx512/threads:$threads/" \
    --benchmark_repetitions=10 --benchmark_out="$out" --benchmark_out_format=json >/dev/null 2>&1
  python3 -c "import json,sys; print(max(b['FLOP/s'] for b in json.load(open(sys.argv[1]))['benchmarks'] if b.get('run_type')=='iteration'))" "$out"
}
ids() {  # $1 token ids below the model's vocabulary, fixed seed
  python3 - "$model/config.json" "$1" <<'PY'
import json, random, sys
c = json.load(open(sys.argv[1])); c = c.get("text_config", c)
random.seed(int(sys.argv[2]))
print(",".join(str(random.randrange(min(c["vocab_size"], 4000))) for _ in range(int(sys.argv[2]))))
PY
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
p1=$(peak)
for n in $lengths; do
  ids "$n" >"$work/ids"
  SLUICE_THREADS=$threads "$sluice" run --model "$model" --prompt-ids "$(cat "$work/ids")" --max-new 1 \
    --experts resident --json --no-progress >"$work/run-$n.json"
done
p2=$(peak)
echo "# threads $threads, fp32 multiply-add peak $(python3 -c "print(f'{$p1/1e9:.1f} / {$p2/1e9:.1f}')") GFLOP/s (before / after)"
echo "tokens prefill-s tok/s GFLOP GFLOP/s floor-s ratio"
for n in $lengths; do
  python3 - "$work/run-$n.json" "$n" "$p1" "$p2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); n = int(sys.argv[2]); peak = max(float(sys.argv[3]), float(sys.argv[4]))
s = j["prefill_ms"] / 1e3; f = j.get("prefill_flops")
if not f:
    print(f"{n} {s:.2f} {n / s:.0f} - - - -"); sys.exit()
floor = f / peak
print(f"{n} {s:.2f} {n / s:.0f} {f / 1e9:.1f} {f / s / 1e9:.1f} {floor:.2f} {s / floor:.2f}")
PY
done
