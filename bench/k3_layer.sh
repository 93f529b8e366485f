#!/usr/bin/env bash
# Tokens/s of K3-shaped layers on this CPU: a checkpoint with Kimi K3's real widths (hidden 7168,
# KDA 96 heads x 128, gated MLA 96 heads with q/kv LoRA 1536/512, latent MoE 3584 with MXFP4
# experts 3072 x 3584, 16 routed + 2 shared) but only two layers (one KDA + MoE, one MLA + MoE)
# and 32 experts per layer, all resident. Reports decode tok/s and the weight bytes one token
# touches per second against a memory-read floor measured in the same run (kernels_bench).
# Usage: bench/k3_layer.sh <build-dir> [work-dir]
set -euo pipefail
build=${1:-build/release}
work=${2:-$build/k3-layer}
sluice="$build/sluice"
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$work/config.json" ]; then
  echo "k3_layer: writing a 2-layer K3-width checkpoint to $work (about 4 GB)"
  # shellcheck disable=SC2046
  "$sluice" make-tiny --out "$work" $(python3 "$here/k3_width.py" args)
fi
prompt=$(seq -s, 11 42)
for threads in 1 2; do
  SLUICE_THREADS=$threads "$sluice" run --model "$work" --prompt-ids "$prompt" --max-new 6 --experts resident --stats \
    --json 2>"$work/stats-$threads.txt" >"$work/run-$threads.json"
  python3 "$here/k3_width.py" report "$work/run-$threads.json" "k3_layer: threads=$threads"
done
echo "k3_layer: memory-read floor (single thread) from kernels_bench:"
"$build/bench/kernels_bench" --benchmark_filter='floor|Floor' --benchmark_color=false 2>/dev/null | grep -i -E "floor|GB" | head -5 || true
