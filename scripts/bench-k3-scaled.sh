#!/usr/bin/env bash
# The measurements of docs/BENCHMARKS.md: a K3-shaped make-tiny model (1.76 GB of experts, 4.4x the
# 0.4 GB cache), four throttled loop drives, drive ceilings, then decode, prefill and drive-scaling
# brackets with `sluice bench run` (floors measured in the same rotation). Needs root.
#
#   scripts/bench-k3-scaled.sh SLUICE WORKDIR [setup|drives|decode|drafts|prefill|scaling|scaling-equal|equal|pair|placement|peer|all|down]...
#
# WORKDIR holds the model (m), per-rung model dirs (m1..m4 share its shards), the loop drives and
# the results (WORKDIR/results/<step>). About 6 GB of disk; `down` removes the drives.
set -euo pipefail
sluice=$(realpath "$1")
work=$2
shift 2
steps=("${@:-all}")
here=$(dirname "$(realpath "$0")")
drives="$work/drives"
rates=340,178,178,143  # MB/s: the reference's 13.6/7.1/7.1/5.7 GB/s ladder divided by 40
cache=0.4
mkdir -p "$work/results"
in_cgroup() { bash "$here/loop-drives.sh" exec "$drives" "$@"; }
ids() {  # N pseudo-random token ids below 512, fixed seed
  python3 -c "import random; random.seed($2); print(','.join(str(random.randrange(1, 512)) for _ in range($1)))"
}

setup() {
  [ -d "$work/m" ] || "$sluice" make-tiny --out "$work/m" --layers 12 --mla-layers 4,8,12 --dense-layers 1 \
    --experts 96 --top-k 8 --moe-inter 1024 --latent 1024 --hidden 1024 --shards 4 --seed 7
  [ -e "$drives/loop-drives.state" ] || bash "$here/loop-drives.sh" up "$drives" 5 "$rates"
  for k in 1 2 3 4; do  # rung k: homes on drives 1..k (drive 1 is the fastest, like an internal SSD)
    mkdir -p "$work/m$k"
    for f in "$work"/m/*.json "$work"/m/*.safetensors; do ln -sf "$f" "$work/m$k/"; done
    homes=()
    for i in $(seq 1 "$k"); do homes+=(--home "$drives/d$i/r$k"); done
    "$sluice" prepare --model "$work/m$k" "${homes[@]}" 2>&1 | tr '\r' '\n' | tail -1
  done
  ids 16 1 > "$work/prompt16.txt"
  ids 256 2 > "$work/prompt256.txt"
}

drive_ceilings() {  # ceilings of the 4 drives (stored in m4's manifest), then each rung's rates
  in_cgroup "$sluice" bench drives --model "$work/m4" --seconds 1 --out "$work/results/drives" \
    $(for i in 1 2 3 4; do echo --home "$drives/d$i/r4"; done) > /dev/null
  for k in 1 2 3; do
    in_cgroup "$sluice" bench drives --model "$work/m$k" --seconds 1 --depths 4 --no-home-files \
      $(for i in $(seq 1 "$k"); do echo --home "$drives/d$i/r$k"; done) > /dev/null
  done
}

decode() {  # (b), (c): streamed with and without prefetch vs all-resident (compute floor), 2 lengths
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt16.txt" --max-new 16,64 --reps 3 \
    --arm "stream:--cache-gb $cache" --arm "noprefetch:--cache-gb $cache --no-prefetch" \
    --arm "resident:--experts resident" --compute-arm resident --floor --out "$work/results/decode"
}

drafts() {  # drafting on/off: prompt lookup, and the target itself as drafter (acceptance upper bound)
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt16.txt" --max-new 64 --reps 2 \
    --arm "off:--cache-gb $cache" --arm "ngram:--cache-gb $cache --draft ngram" \
    --arm "selfdraft:--cache-gb $cache --draft model:$work/m" --floor --out "$work/results/drafts"
}

prefill() {  # (a): a 256-token prompt read once per layer vs in 64-position passes
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt256.txt" --max-new 1 --reps 3 \
    --arm "pass256:--cache-gb $cache" --arm "pass64:--cache-gb $cache --prefill-chunk 64" \
    --arm "resident:--experts resident" --compute-arm resident --floor --out "$work/results/prefill"
}

scaling() {  # 4/3/2/1 homes in one interleaved bracket; ratios are to the 4-home arm. Needs `drives`:
  # each rung is first re-placed by the drives' measured rates (prepare --rebalance), as an install
  # on unequal drives would be (m4 stays so: `equal` wants equal shares, so `all` runs it first).
  for k in 2 3 4; do
    for i in $(seq 1 "$k"); do cp "$drives/d$i/r4/sluice-drive.json" "$drives/d$i/r$k/" 2>/dev/null || true; done
    "$sluice" prepare --model "$work/m$k" --rebalance 2>&1 | tr '\r' '\n' | grep -v '%' | tail -1
  done
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt16.txt" --max-new 32 --reps 3 \
    --arm "homes4:--model $work/m4 --cache-gb $cache" --arm "homes3:--model $work/m3 --cache-gb $cache" \
    --arm "homes2:--model $work/m2 --cache-gb $cache" --arm "homes1:--model $work/m1 --cache-gb $cache" \
    --floor --out "$work/results/${1:-scaling}"
}

scaling_equal() {  # the scaling bracket on four equal drives (210 MB/s each, the ladder's total):
  # measured again, re-placed, run; then the ladder's rates, measurements and placement come back.
  bash "$here/loop-drives.sh" rates "$drives" 210,210,210,210
  drive_ceilings
  scaling scaling-equal
  bash "$here/loop-drives.sh" rates "$drives" "$rates"
  drive_ceilings
  for k in 2 3 4; do "$sluice" prepare --model "$work/m$k" --rebalance 2>&1 | tr '\r' '\n' | grep -v '%' | tail -1; done
}

pair() {  # drafting on/off with text on the trained default pair (models/default), text of record checked
  local src
  src=$(realpath "$here/../models/default")
  mkdir -p "$work/dt"
  cp "$src"/target/* "$work/dt/"
  "$sluice" prepare --model "$work/dt" $(for i in 1 2 3 4; do echo --home "$drives/d$i/dt"; done) 2>&1 |
    tr '\r' '\n' | tail -1
  local ids out
  ids=$("$sluice" tokenize --model "$work/dt" --json "The capital of France is" | tr -d '[] ')
  out=$("$sluice" run --model "$work/dt" --prompt-ids "$ids" --max-new 256 --experts resident --json |
    python3 -c "import json, sys; print(','.join(map(str, json.load(sys.stdin)['generated_ids'])))")
  "$sluice" detokenize --model "$work/dt" "$out" > "$work/record256.txt"
  in_cgroup "$sluice" bench run --model "$work/dt" --prompt "The capital of France is" --max-new 64,256 --reps 3 \
    --arm "off:--cache-gb 0.005" --arm "draft:--cache-gb 0.005 --draft model:$src/draft" \
    --arm "ngram:--cache-gb 0.005 --draft ngram" --arm "resident:--experts resident" --compute-arm resident \
    --expect-text "$(cat "$work/record256.txt")" --floor --floor-seconds 1 --out "$work/results/pair"
}

equal() {  # (b) without the unequal ladder: the same total cap split evenly over the four drives
  bash "$here/loop-drives.sh" rates "$drives" 210,210,210,210
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt16.txt" --max-new 64 --reps 2 \
    --arm "stream:--cache-gb $cache" --arm "noprefetch:--cache-gb $cache --no-prefetch" --floor \
    --out "$work/results/equal"
  bash "$here/loop-drives.sh" rates "$drives" "$rates"
}

placement() {  # the ladder's homes placed by measured speed (after `drives`) vs equal shares (m4)
  mkdir -p "$work/m4s"
  for f in "$work"/m/*.json "$work"/m/*.safetensors; do ln -sf "$f" "$work/m4s/"; done
  rm -f "$work/m4s/sluice-manifest.json" "$work/m4s/sluice-heat.json"
  for i in 1 2 3 4; do
    mkdir -p "$drives/d$i/r4s"
    cp "$drives/d$i/r4/sluice-drive.json" "$drives/d$i/r4s/"
  done
  "$sluice" prepare --model "$work/m4s" $(for i in 1 2 3 4; do echo --home "$drives/d$i/r4s"; done) 2>&1 |
    tr '\r' '\n' | grep -v '%'
  in_cgroup "$sluice" bench run --model "$work/m4" --prompt-file "$work/prompt16.txt" --max-new 64 --reps 3 \
    --arm "equal:--model $work/m4 --cache-gb $cache" --arm "byspeed:--model $work/m4s --cache-gb $cache" \
    --floor --out "$work/results/placement"
}

peer() {  # vs llama.cpp (issue 18): the same K3-shaped weights with the default model's tokenizer,
  # sluice streaming from the ladder (placed by speed) vs llama.cpp's mmap of the GGUF on one drive
  # as fast as the four together (840 MB/s), each run in a memory cgroup of 1/3 of its model's bytes
  # (memory + page cache), page caches dropped before each run; then both unlimited and resident.
  # Needs `drives` first, and node-llama-cpp in $SLUICE_PEER_DIR or bench/peer (see bench/peer/README.md).
  local mt="$work/mt" src
  src=$(realpath "$here/../models/default/target")
  if [ ! -d "$mt" ]; then
    "$sluice" make-tiny --out "$mt" --layers 12 --mla-layers 4,8,12 --dense-layers 1 --experts 96 --top-k 8 \
      --moe-inter 1024 --latent 1024 --hidden 1024 --shards 4 --seed 7 --vocab 4352
    cp "$src/tiktoken.model" "$src/tokenizer_config.json" "$mt/"
  fi
  rm -rf "$drives"/d{1,2,3}/r{1,2,3}  # the scaling rungs' copies: room on the small drives
  for i in 1 2 3 4; do
    mkdir -p "$drives/d$i/rt"
    cp "$drives/d$i/r4/sluice-drive.json" "$drives/d$i/rt/"
  done
  [ -f "$mt/sluice-manifest.json" ] || "$sluice" prepare --model "$mt" $(for i in 1 2 3 4; do echo --home "$drives/d$i/rt"; done) 2>&1 |
    tr '\r' '\n' | grep -v '%  '
  [ -e "$work/gd/loop-drives.state" ] || bash "$here/loop-drives.sh" up "$work/gd" 6 840
  [ -f "$work/gd/d1/mt.gguf" ] || "$sluice" export-gguf --model "$mt" --out "$work/gd/d1/mt.gguf" --quiet
  ids 16 3 > "$work/prompt16t.txt"
  in_cgroup "$sluice" bench run --model "$mt" --prompt-file "$work/prompt16t.txt" --max-new 32 --reps 2 --cold \
    --memory-limit 0.333x --arm "sluice:--cache-gb 0.3" \
    --arm "llama:--peer 'node $here/../bench/peer/llama.mjs' --model $work/gd/d1/mt.gguf --threads 2" \
    --out "$work/results/peer-limited"
  in_cgroup "$sluice" bench run --model "$mt" --prompt-file "$work/prompt16t.txt" --max-new 32 --reps 3 \
    --arm "sluice:--experts resident" \
    --arm "llama:--peer 'node $here/../bench/peer/llama.mjs' --model $work/gd/d1/mt.gguf --threads 2" \
    --out "$work/results/peer-resident"
}

for s in "${steps[@]}"; do
  case "$s" in
    setup) setup ;;
    drives) drive_ceilings ;;
    decode) decode ;;
    drafts) drafts ;;
    prefill) prefill ;;
    scaling) scaling ;;
    scaling-equal) scaling_equal ;;
    equal) equal ;;
    placement) placement ;;
    peer) peer ;;
    pair) pair ;;
    all) setup; drive_ceilings; decode; drafts; prefill; equal; scaling; pair ;;
    down) bash "$here/loop-drives.sh" down "$drives"; [ ! -e "$work/gd/loop-drives.state" ] || bash "$here/loop-drives.sh" down "$work/gd" ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
