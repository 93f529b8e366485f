#!/usr/bin/env bash
# Streamed decode of the issue-17 architectures from four throttled loop drives (the ladder of
# scripts/bench-k3-scaled.sh: 340/178/178/143 MB/s): per architecture a 12-layer make-tiny model
# with ~1.7 GB of routed experts (DeepSeek-V3 with FP8 weights, Qwen3-MoE BF16, gpt-oss MXFP4),
# 4x the 0.4 GB cache, placed by measured drive speed, then `sluice bench run` with the experts
# streamed and all resident (the compute floor), floors measured in the same rotation. Needs root.
#
#   scripts/bench-moe-stream.sh SLUICE WORKDIR [ARCH...]      (ARCH: deepseek_v3 qwen3_moe gpt_oss)
#   scripts/bench-moe-stream.sh SLUICE WORKDIR down           remove the drives
#
# Results: WORKDIR/results/<arch>/ (results.md, summary.csv). About 12 GB of disk.
set -euo pipefail
sluice=$(realpath "$1")
work=$2
shift 2
here=$(dirname "$(realpath "$0")")
drives="$work/drives"
rates=340,178,178,143
cache=0.4
if [ "${1:-}" = down ]; then bash "$here/loop-drives.sh" down "$drives"; exit 0; fi
archs=("${@:-deepseek_v3 qwen3_moe gpt_oss}")
# shellcheck disable=SC2206
archs=(${archs[*]})
declare -A flags=(
  [deepseek_v3]="--arch deepseek_v3 --fp8 --hidden 1024 --layers 12 --dense-layers 1 --heads 8 --q-lora 256 --kv-lora 128 \
--nope 64 --rope 32 --v-dim 64 --dense-inter 2048 --experts 48 --top-k 8 --shared 1 --moe-inter 1024 --expert-groups 8 \
--topk-groups 4 --routed-scaling 2.5"
  [qwen3_moe]="--arch qwen3_moe --hidden 1024 --layers 12 --dense-layers 0 --heads 8 --kv-heads 2 --head-dim 128 \
--experts 48 --top-k 8 --moe-inter 512"
  [gpt_oss]="--arch gpt_oss --hidden 1024 --layers 12 --heads 8 --kv-heads 2 --head-dim 64 --experts 96 --top-k 4 \
--moe-inter 1024 --window 128 --rope-theta 150000"
)
mkdir -p "$work/results"
[ -e "$drives/loop-drives.state" ] || bash "$here/loop-drives.sh" up "$drives" 8 "$rates"
in_cgroup() { bash "$here/loop-drives.sh" exec "$drives" "$@"; }
python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 500)) for _ in range(16)))" > "$work/prompt16.txt"
for arch in "${archs[@]}"; do
  m="$work/$arch"
  if [ ! -f "$m/config.json" ]; then
    # shellcheck disable=SC2086
    "$sluice" make-tiny --out "$m" --vocab 512 --shards 4 --seed 7 ${flags[$arch]} 2>/dev/null
  fi
  homes=()
  for i in 1 2 3 4; do homes+=(--home "$drives/d$i/$arch"); done
  if [ ! -f "$m/sluice-manifest.json" ]; then
    # Packed in equal shares, the drives measured on the packed records, then re-placed by those
    # rates. (Before 2026-12-05 the measurement ran before the packing, on empty homes, failed
    # silently, and the installs stayed in equal shares.)
    "$sluice" prepare --model "$m" "${homes[@]}" 2>&1 | tr '\r' '\n' | tail -1
    in_cgroup "$sluice" bench drives --model "$m" --seconds 1 "${homes[@]}" > /dev/null
    "$sluice" prepare --model "$m" --rebalance 2>&1 | tr '\r' '\n' | grep -v '%' | tail -1
  fi
  in_cgroup "$sluice" bench run --model "$m" --prompt-file "$work/prompt16.txt" --max-new 32 --reps 3 \
    --arm "stream:--cache-gb $cache" --arm "resident:--experts resident" --compute-arm resident --floor \
    --out "$work/results/$arch"
done
