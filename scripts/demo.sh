#!/usr/bin/env bash
# `make demo`: the main job on the built-in default model. Writes a K3-architecture checkpoint
# (random weights until the trained default of issue 9 lands), packs its routed experts onto a
# home on disk, and generates with an expert cache a quarter the size of the expert bank, so
# experts really stream from the drive; prints the stats line. Usage: demo.sh <sluice-binary>
set -euo pipefail
sluice=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/demo"
model="$out/model"
if [ ! -f "$model/config.json" ]; then
  echo "demo: writing a K3-architecture model (KDA + gated MLA + Block AttnRes + latent MoE, MXFP4 experts)"
  "$sluice" make-tiny --arch kimi_k3 --out "$model" --seed 5 --hidden 256 --layers 9 --experts 64 --top-k 4 \
    --moe-inter 512 --latent 256 --kv-lora 64 --q-lora 64 --kda-head-dim 32 --vocab 2048 --shards 2
fi
if [ ! -f "$model/sluice-manifest.json" ]; then
  echo "demo: packing routed experts onto the home $out/home-a"
  "$sluice" prepare --model "$model" --home "$out/home-a"
fi
bank=$(du -sb "$out/home-a" | cut -f1)
cache_gb=$(python3 -c "print($bank / 4 / 1e9)")
echo "demo: expert bank $((bank / 1000000)) MB on disk, cache ${cache_gb} GB (a quarter of it)"
echo "demo: generating 48 tokens (ids; the random-weight model has no tokenizer yet)"
"$sluice" run --model "$model" --prompt-ids 17,42,256,1024,7,99,512,3 --max-new 48 --cache-gb "$cache_gb" --stats
