#!/usr/bin/env bash
# Streamed decode of the MoE architectures from four throttled loop drives (the ladder of
# scripts/bench-k3-scaled.sh: 340/178/178/143 MB/s): per architecture a 12-layer make-tiny model
# with ~1.7 GB of routed experts (scripts/moe-shapes.sh: K3-shaped, DeepSeek-V3 with FP8 weights,
# Qwen3-MoE BF16, gpt-oss MXFP4), 4x the 0.4 GB cache, placed by measured drive speed, then
# `sluice bench run` with the experts streamed and all resident (the compute floor), floors
# measured in the same rotation, arms interleaved A B B A. Needs root.
#
#   scripts/bench-moe-stream.sh SLUICE WORKDIR [ARCH...]            the install as prepare makes it
#   scripts/bench-moe-stream.sh SLUICE WORKDIR --stripes [ARCH...]  whole records against striped
#   scripts/bench-moe-stream.sh SLUICE WORKDIR down                 remove the drives
#
# ARCH: kimi_k3 deepseek_v3 qwen3_moe gpt_oss (default: all four). With --stripes the model is
# installed twice on the same drives, both placed by measured speed: records whole (`prepare
# --stripe off`) and cut into one part per home (`--stripe on`), one bracket with both.
# Results: WORKDIR/results/<arch>/ or WORKDIR/results-stripe/<arch>/ (results.md, summary.csv).
# About 4 GB of disk per architecture and install.
set -euo pipefail
sluice=$(realpath "$1")
work=$2
shift 2
here=$(dirname "$(realpath "$0")")
drives="$work/drives"
rates=340,178,178,143
cache=0.4
if [ "${1:-}" = down ]; then bash "$here/loop-drives.sh" down "$drives"; exit 0; fi
stripes=0
if [ "${1:-}" = --stripes ]; then stripes=1; shift; fi
archs=("${@:-kimi_k3 deepseek_v3 qwen3_moe gpt_oss}")
# shellcheck disable=SC2206
archs=(${archs[*]})
# shellcheck source=moe-shapes.sh
source "$here/moe-shapes.sh"
[ -e "$drives/loop-drives.state" ] || bash "$here/loop-drives.sh" up "$drives" 8 "$rates"
in_cgroup() { bash "$here/loop-drives.sh" exec "$drives" "$@"; }
python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 500)) for _ in range(16)))" > "$work/prompt16.txt"
homes_of() { for i in 1 2 3 4; do echo --home "$drives/d$i/$1"; done; }

# install MODEL_DIR HOME_TAG [PREPARE FLAGS...]: packed in equal shares, the drives measured on
# the packed records (<home>/sluice-drive.json), then re-placed by those rates. (Before 2026-12-05
# the measurement ran before the packing, on empty homes, failed silently, and the installs stayed
# in equal shares.)
install() {
  local m=$1 tag=$2
  shift 2
  [ -f "$m/sluice-manifest.json" ] && return 0
  # shellcheck disable=SC2046
  "$sluice" prepare --model "$m" "$@" $(homes_of "$tag") 2>&1 | tr '\r' '\n' | tail -1
  # shellcheck disable=SC2046
  in_cgroup "$sluice" bench drives --model "$m" --seconds 1 $(homes_of "$tag") > /dev/null
  "$sluice" prepare --model "$m" "$@" --rebalance 2>&1 | tr '\r' '\n' | grep -v '%' | tail -1
}

for arch in "${archs[@]}"; do
  m="$work/$arch"
  if [ ! -f "$m/config.json" ]; then
    # shellcheck disable=SC2086
    "$sluice" make-tiny --out "$m" --vocab 512 --shards 4 --seed 7 ${moe_flags[$arch]} 2>/dev/null
  fi
  if [ "$stripes" = 0 ]; then
    install "$m" "$arch"
    in_cgroup "$sluice" bench run --model "$m" --prompt-file "$work/prompt16.txt" --max-new 32 --reps 3 \
      --arm "stream:--cache-gb $cache" --arm "resident:--experts resident" --compute-arm resident --floor \
      --out "$work/results/$arch"
    continue
  fi
  for v in whole stripe; do
    if [ ! -f "$m-$v/config.json" ]; then
      cp -al "$m" "$m-$v"  # the same checkpoint files; each install writes its own manifest
      rm -f "$m-$v/sluice-manifest.json" "$m-$v/sluice-heat.json"
    fi
  done
  install "$m-whole" "$arch-whole" --stripe off
  install "$m-stripe" "$arch-stripe" --stripe on
  in_cgroup "$sluice" bench run --model "$m-whole" --prompt-file "$work/prompt16.txt" --max-new 32 --reps 3 \
    --arm "whole:--model $m-whole --cache-gb $cache" --arm "stripe:--model $m-stripe --cache-gb $cache" \
    --arm "resident:--model $m-whole --experts resident" --compute-arm resident --floor \
    --out "$work/results-stripe/$arch"
done
