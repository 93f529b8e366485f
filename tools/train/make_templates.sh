#!/usr/bin/env bash
# Writes tools/train/templates/{target,draft}: the config.json, generation_config.json and the tensor
# roster (name, dtype, shape per safetensors file, in file order) of a `sluice make-tiny` checkpoint
# of the default model sizes. The trainer exports its weights into exactly this roster.
# Usage: make_templates.sh <sluice-binary>
set -euo pipefail
sluice=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sluice" make-tiny --arch kimi_k3 --out "$tmp/target" --seed 1 --vocab 4352 --hidden 256 --layers 9 \
  --mla-layers 4,8,9 --kda-heads 4 --kda-head-dim 64 --heads 4 --q-lora 128 --kv-lora 64 --nope 32 --rope 16 \
  --v-dim 32 --dense-inter 1024 --experts 64 --top-k 4 --shared 2 --moe-inter 256 --latent 128 --block 3 --shards 2
"$sluice" make-tiny --arch kimi_k3 --out "$tmp/draft" --seed 2 --vocab 4352 --hidden 128 --layers 3 \
  --mla-layers 3 --kda-heads 2 --kda-head-dim 64 --heads 2 --q-lora 64 --kv-lora 32 --nope 32 --rope 16 \
  --v-dim 32 --dense-inter 384 --experts 8 --top-k 2 --shared 1 --moe-inter 128 --latent 64 --block 3 --shards 1
for m in target draft; do
  python3 "$here/template_roster.py" "$tmp/$m" "$here/templates/$m"
done
