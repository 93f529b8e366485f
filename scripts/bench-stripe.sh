#!/usr/bin/env bash
# Whole records against striped records, streamed from four throttled loop drives (the ladder of
# scripts/bench-k3-scaled.sh: 340/178/178/143 MB/s), one bracket per architecture: the same
# make-tiny model installed twice on the same drives, once with each record whole on one home
# (`prepare --stripe off`, homes by measured speed) and once with each record cut into one part
# per home sized by the measured speeds (`--stripe on`), plus the all-resident compute floor and
# the raw O_DIRECT floor of each install, arms interleaved A B B A. Needs root.
#
#   scripts/bench-stripe.sh SLUICE WORKDIR [ARCH...]   (ARCH: kimi_k3 deepseek_v3 qwen3_moe gpt_oss)
#   scripts/bench-stripe.sh SLUICE WORKDIR down        remove the drives
#
# Results: WORKDIR/results-stripe/<arch>/ (results.md, summary.csv). About 14 GB of disk.
set -euo pipefail
sluice=$(realpath "$1")
work=$2
shift 2
here=$(dirname "$(realpath "$0")")
drives="$work/drives"
rates=340,178,178,143
cache=0.4
if [ "${1:-}" = down ]; then bash "$here/loop-drives.sh" down "$drives"; exit 0; fi
archs=("${@:-kimi_k3 deepseek_v3 qwen3_moe gpt_oss}")
# shellcheck disable=SC2206
archs=(${archs[*]})
# The shapes of scripts/bench-k3-scaled.sh (kimi_k3) and scripts/bench-moe-stream.sh (the others).
declare -A flags=(
  [kimi_k3]="--layers 12 --mla-layers 4,8,12 --dense-layers 1 --experts 96 --top-k 8 --moe-inter 1024 --latent 1024 \
--hidden 1024"
  [deepseek_v3]="--arch deepseek_v3 --fp8 --hidden 1024 --layers 12 --dense-layers 1 --heads 8 --q-lora 256 --kv-lora 128 \
--nope 64 --rope 32 --v-dim 64 --dense-inter 2048 --experts 48 --top-k 8 --shared 1 --moe-inter 1024 --expert-groups 8 \
--topk-groups 4 --routed-scaling 2.5"
  [qwen3_moe]="--arch qwen3_moe --hidden 1024 --layers 12 --dense-layers 0 --heads 8 --kv-heads 2 --head-dim 128 \
--experts 48 --top-k 8 --moe-inter 512"
  [gpt_oss]="--arch gpt_oss --hidden 1024 --layers 12 --heads 8 --kv-heads 2 --head-dim 64 --experts 96 --top-k 4 \
--moe-inter 1024 --window 128 --rope-theta 150000"
)
mkdir -p "$work/results-stripe"
[ -e "$drives/loop-drives.state" ] || bash "$here/loop-drives.sh" up "$drives" 8 "$rates"
in_cgroup() { bash "$here/loop-drives.sh" exec "$drives" "$@"; }
[ -f "$work/prompt16.txt" ] ||
  python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 500)) for _ in range(16)))" > "$work/prompt16.txt"
homes_of() { for i in 1 2 3 4; do echo --home "$drives/d$i/$1"; done; }
for arch in "${archs[@]}"; do
  m="$work/$arch"
  if [ ! -f "$m/config.json" ]; then
    # shellcheck disable=SC2086
    "$sluice" make-tiny --out "$m" --vocab 512 --shards 4 --seed 7 ${flags[$arch]} 2>/dev/null
  fi
  for v in whole stripe; do
    if [ ! -f "$m-$v/config.json" ]; then
      cp -al "$m" "$m-$v"  # the same checkpoint files; each install writes its own manifest
      rm -f "$m-$v/sluice-manifest.json" "$m-$v/sluice-heat.json"
    fi
  done
  if [ ! -f "$m-stripe/sluice-manifest.json" ]; then
    # Packed in equal shares, the drives measured on the packed records (<home>/sluice-drive.json),
    # then re-placed by those rates: both installs are placed by measured speed.
    # shellcheck disable=SC2046
    "$sluice" prepare --model "$m-whole" --stripe off $(homes_of "$arch-whole") 2>&1 | tr '\r' '\n' | tail -1
    # shellcheck disable=SC2046
    in_cgroup "$sluice" bench drives --model "$m-whole" --seconds 1 $(homes_of "$arch-whole") > /dev/null
    "$sluice" prepare --model "$m-whole" --stripe off --rebalance 2>&1 | tr '\r' '\n' | grep -v '%' | tail -1
    for i in 1 2 3 4; do
      mkdir -p "$drives/d$i/$arch-stripe"
      cp "$drives/d$i/$arch-whole/sluice-drive.json" "$drives/d$i/$arch-stripe/"
    done
    # shellcheck disable=SC2046
    "$sluice" prepare --model "$m-stripe" --stripe on $(homes_of "$arch-stripe") 2>&1 | tr '\r' '\n' | tail -1
  fi
  in_cgroup "$sluice" bench run --model "$m-whole" --prompt-file "$work/prompt16.txt" --max-new 32 --reps 3 \
    --arm "whole:--model $m-whole --cache-gb $cache" --arm "stripe:--model $m-stripe --cache-gb $cache" \
    --arm "resident:--model $m-whole --experts resident" --compute-arm resident --floor \
    --out "$work/results-stripe/$arch"
done
