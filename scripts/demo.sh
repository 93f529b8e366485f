#!/usr/bin/env bash
# `make demo`: the main job on the built-in default model pair (models/default, trained by
# tools/train): a Kimi K3-architecture target (KDA + gated MLA + Block AttnRes + latent MoE with 64
# MXFP4 experts per layer) whose routed experts are packed onto a home on disk and streamed through
# an expert cache a quarter the size of the expert bank, with the small draft model proposing tokens
# that the target verifies. Streams the generated text, then the stats line.
# Usage: demo.sh <sluice-binary> [PROMPT]
set -euo pipefail
sluice=$1
prompt=${2:-"In the beginning God created the heaven and the earth. And the earth was"}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/demo"
src="$root/models/default/target"
draft="$root/models/default/draft"
model="$out/default-target"
home="$out/home-default"

# `sluice prepare` writes its manifest into the model directory: work on a copy under build/, so the
# committed model stays untouched. A changed source model starts the copy and the home afresh.
mkdir -p "$model"
changed=0
for f in "$src"/*; do
  name=$(basename "$f")
  if ! cmp -s "$f" "$model/$name"; then
    cp "$f" "$model/$name.tmp" && mv "$model/$name.tmp" "$model/$name"
    changed=1
  fi
done
if [ "$changed" = 1 ]; then
  rm -rf "$home" "$model/sluice-manifest.json"
fi
# A copy packed by an older sluice: migrate its manifest as a user would (`sluice upgrade`, a
# no-op when it is current), or pack it again where that fails.
if [ -f "$model/sluice-manifest.json" ] && ! "$sluice" upgrade --model "$model" >/dev/null 2>&1; then
  echo "demo: the packed copy's manifest could not be upgraded; packing again"
  rm -rf "$home" "$model/sluice-manifest.json"
fi
if [ ! -f "$model/sluice-manifest.json" ]; then
  echo "demo: packing the default target's routed experts (8 layers x 64 experts, MXFP4) onto the home $home"
  "$sluice" prepare --model "$model" --home "$home" >/dev/null
fi
bank=$(du -sb "$home" | cut -f1)
cache_gb=$(awk -v b="$bank" 'BEGIN { printf "%.6f", b / 4 / 1e9 }')
echo "demo: expert bank $((bank / 1000000)) MB on disk, expert cache ${cache_gb} GB (a quarter of it); draft model $draft"
# The GPU when this machine and build have one (`sluice devices`), else the CPU; DEVICE overrides.
device=${DEVICE:-$("$sluice" devices 2>/dev/null | awk '/^cuda:0 / { print "cuda:0"; found = 1; exit } END { if (!found) print "cpu" }')}
echo "demo: device $device"
echo "demo: prompt: $prompt"
echo "---"
args=(--model "$model" --device "$device" --max-new 64 --cache-gb "$cache_gb" --stats --draft "model:$draft")
err="$out/run-stderr.txt"
set +e
if grep -q -- '--prompt TEXT' <<<"$("$sluice" run --help)"; then
  "$sluice" run "${args[@]}" --prompt "$prompt" 2>"$err"
  status=$?
else
  # This sluice has no text prompt yet: tokenize with the model's tokenizer and stream the ids back
  # through detokenize as they arrive.
  ids=$("$sluice" tokenize --model "$model" "$prompt" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
  printf '%s' "$prompt"
  "$sluice" run "${args[@]}" --prompt-ids "$ids" 2>"$err" | while read -r -d ' ' id; do
    "$sluice" detokenize --model "$model" "$id"
  done
  status=${PIPESTATUS[0]}
fi
set -e
echo
echo "---"
if [ "$status" -ne 0 ]; then
  cat "$err" >&2
  exit "$status"
fi
# The summary lines of --stats (--stats=verbose would add a line per decode step).
grep -E '^\[(stats|store|home [0-9]+)\]|^\[draft\] drafter=' "$err"
