#!/usr/bin/env bash
# Decode tokens/s of the issue-17 architectures at real widths on this CPU (bench/arch_width.py:
# DeepSeek-V3 FP8, Qwen3-235B-A22B, gpt-oss-120b MXFP4; two layers, 16 experts, all resident),
# as weight bytes read per second against a memory-read floor read by as many threads, measured in
# the same run (kernels_bench's floor column, read before and after each model run). One line per model and thread count:
#   arch threads GB/token tok/s GB/s floor-GB/s ratio
# Usage: bench/arch_layers.sh <build-dir> [work-dir] [names...]
set -euo pipefail
build=${1:-build/release}
work=${2:-$build/arch-layers}
shift $(( $# >= 2 ? 2 : $# ))
sluice="$build/sluice"
here=$(cd "$(dirname "$0")" && pwd)
names=${*:-$(python3 "$here/arch_width.py" names)}
mkdir -p "$work"
floor() {  # floor GB/s read by $1 threads, from kernels_bench (a BF16 row's floor column)
  local which="(avx512|avx2)"
  [ "$1" -gt 1 ] && which="(avx512|avx2)-threads:$1"
  "$build/bench/kernels_bench" --benchmark_filter="bf16_3072x3584/$which/n:1/" \
    --benchmark_color=false 2>/dev/null | awk '/manual_time/ { f = $3 } END { print f }'  # the summary row, last
}
prompt=$(seq -s, 11 42)
echo "arch threads GB/token tok/s GB/s floor-GB/s ratio"
for name in $names; do
  dir="$work/$name"
  if [ ! -f "$dir/config.json" ]; then
    echo "arch_layers: writing a 2-layer $name checkpoint at real widths to $dir" >&2
    # shellcheck disable=SC2046
    "$sluice" make-tiny --out "$dir" $(python3 "$here/arch_width.py" args "$name") 2>/dev/null
  fi
  for threads in 1 2; do
    f1=$(floor "$threads")
    SLUICE_THREADS=$threads "$sluice" run --model "$dir" --prompt-ids "$prompt" --max-new 8 --experts resident --json \
      --ignore-eos >"$work/$name-run-$threads.json"
    f2=$(floor "$threads")
    read -r gb tps rate < <(python3 "$here/arch_width.py" report "$dir" "$work/$name-run-$threads.json")
    python3 -c "import sys; f=(float(sys.argv[1])+float(sys.argv[2]))/2; r=float(sys.argv[3]); print(f'$name $threads $gb $tps $rate {f:.2f} {r/f:.3f}')" "$f1" "$f2" "$rate"
  done
done
