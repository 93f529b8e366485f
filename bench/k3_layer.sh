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
if [ ! -f "$work/config.json" ]; then
  echo "k3_layer: writing a 2-layer K3-width checkpoint to $work (about 4 GB)"
  "$sluice" make-tiny --arch kimi_k3 --out "$work" --seed 3 --vocab 1024 --hidden 7168 --layers 2 --mla-layers 2 \
    --dense-layers 0 --kda-heads 96 --kda-head-dim 128 --heads 96 --q-lora 1536 --kv-lora 512 --nope 128 --rope 64 \
    --v-dim 128 --experts 32 --top-k 16 --shared 2 --moe-inter 3072 --latent 3584 --block 12 --shards 4
fi
prompt=$(seq -s, 11 42)
for threads in 1 2; do
  SLUICE_THREADS=$threads "$sluice" run --model "$work" --prompt-ids "$prompt" --max-new 6 --experts resident --stats \
    --json 2>"$work/stats-$threads.txt" >"$work/run-$threads.json"
  python3 - "$work" "$threads" <<'PY'
import json, sys
work, threads = sys.argv[1], sys.argv[2]
r = json.load(open(f"{work}/run-{threads}.json"))
n = len(r["generated_ids"])
decode_s = r["decode_ms"] / 1e3
tps = (n - 1) / decode_s if n > 1 and decode_s > 0 else 0
# Bytes of weights one decode token touches: everything but the unrouted experts and the vocabulary rows.
H, P, E, k, I, R = 7168, 96 * 128, 32, 16, 3072, 3584
kda = (4 * P * H + P * H + 128 * H + P * 128 + 96 * H) * 2
mla = (1536 * H + 96 * 192 * 1536 + 576 * H + 96 * 256 * 512 + 96 * 128 * H + H * 96 * 128) * 2
moe = (E * H + R * H + H * R + 3 * 2 * I * H) * 2
expert = (2 * I * R // 2 + 2 * I * R // 32) + (R * I // 2 + R * I // 32)
per_token = kda + mla + 2 * moe + 2 * k * expert + 1024 * H * 2
print(f"k3_layer: threads={threads} prefill {len(r['prompt_ids'])} tokens in {r['prefill_ms']:.0f} ms, "
      f"decode {tps:.2f} tok/s, weight bytes/token {per_token/1e9:.2f} GB -> {per_token*tps/1e9:.2f} GB/s")
PY
done
echo "k3_layer: memory-read floor (single thread) from kernels_bench:"
"$build/bench/kernels_bench" --benchmark_filter='floor|Floor' --benchmark_color=false 2>/dev/null | grep -i -E "floor|GB" | head -5 || true
