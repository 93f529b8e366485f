#!/usr/bin/env bash
# Corpus recipe for the default model pair: public-domain / freely licensed English from Debian
# packages (the King James Bible, the Debian Reference, the Python 3 documentation), installed with
# apt-get and turned into plain text by make_corpus.py: train.txt.gz and val.txt.gz (held-out
# documents) in the output folder (default .carry/train, which `run` carries to the GPU machine).
# Not part of CI: scripts/install-deps.sh does not install these packages.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.carry/train}
pkgs=(bible-kjv bible-kjv-text debian-reference-en python3-doc)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -l0 "Gen1:1-Rev22:21" </dev/null >"$work/kjv.txt"
zcat /usr/share/debian-reference/debian-reference.en.txt.gz >"$work/debian-reference.txt"
pydoc=$(ls -d /usr/share/doc/python3.*/html | sort -V | tail -1)
python3 "$root/tools/train/make_corpus.py" --kjv "$work/kjv.txt" --debref "$work/debian-reference.txt" \
  --pydoc "$pydoc" --out "$out"
ls -la "$out"
