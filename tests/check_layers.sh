#!/usr/bin/env bash
# The layer rules of docs/DESIGN.md, checked on every #include "..." of src/: a folder may include
# only the folders its row allows (data flows down, results flow up), and a device backend's own
# headers (device/cpu/, device/cuda/) only from inside device/ (device/device.h is everything
# else's door to the backends). Prints each violation as FILE:LINE: folder -> folder; exit 1 if any.
# Usage: check_layers.sh <source-dir>
set -euo pipefail
src=$1/src
declare -A allowed=(
  [core]=""
  [format]="core"
  [tokenizer]="core format"
  [guide]="core"
  [device]="core"
  [store]="core format device"
  [fetch]="core format store"
  [model]="core format device store"
  [runtime]="core fetch format guide device model store tokenizer"
  [serve]="core fetch format guide runtime tokenizer"
  [export]="core format device model store tokenizer"
  [bench]="core format device store"
  [cli]="bench core export fetch format guide device model runtime serve store tokenizer"
)
bad=0
for dir in "$src"/*/; do
  layer=$(basename "$dir")
  [ -n "${allowed[$layer]+x}" ] || { echo "check_layers: src/$layer is not in the layer table (docs/DESIGN.md, this script)"; bad=1; continue; }
  while IFS=: read -r file line text; do
    target=$(sed -E 's|#include "([a-z_]+)/.*|\1|' <<<"$text")
    [ "$target" = "$layer" ] && continue
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "${file#"$1"/}:$line: $layer -> $target"
      bad=1
    fi
    if [ "$layer" != device ] && [[ "$text" =~ \#include\ \"device/(cpu|cuda)/ ]]; then
      echo "${file#"$1"/}:$line: a device backend's header outside device/ (use device/device.h)"
      bad=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$dir" --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' || true)
done
[ "$bad" -eq 0 ] && echo "check_layers: every include of src/ keeps the layer rules"
exit "$bad"
