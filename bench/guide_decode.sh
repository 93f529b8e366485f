#!/usr/bin/env bash
# What guided decoding costs a decode, end to end: `sluice run --chat` on MODEL with no constraint,
# with JSON mode (--json-object) and with a JSON Schema (--json-schema), greedy and at temperature
# 1, the arms interleaved REPS times; prints decode ms per token of each run and the constraint's
# own line (masks computed, host time waited in the constraint, as a share of the decode).
# Usage: bench/guide_decode.sh SLUICE MODEL [NEW_TOKENS] [REPS] [-- extra run flags]
# For a 160k-class vocabulary: a make-tiny checkpoint with Qwen3's tokenizer, e.g.
#   sluice make-tiny --arch qwen3_moe --out M --vocab 151936 --hidden 2048 --layers 4 --heads 32 \
#     --kv-heads 4 --head-dim 128 --experts 16 --top-k 8 --moe-inter 768 --dense-layers 0
#   cp build/tokenizer-data/qwen3/tokenizer*.json M/
# (Qwen3-30B-A3B's widths and vocabulary, 4 of its 48 layers).
set -euo pipefail
sluice=$1
model=$2
new=${3:-128}
reps=${4:-2}
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = "--" ] && shift
extra=("$@")
schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
cat >"$schema" <<'JSON'
{"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 40},
  "age": {"type": "integer"},
  "role": {"enum": ["admin", "user", "guest"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
              "required": ["city", "zip"], "additionalProperties": false},
  "active": {"type": "boolean"}},
 "required": ["name", "age", "role", "tags", "address", "active"], "additionalProperties": false}
JSON
prompt="Describe a user of this system as a JSON object: name, age, role, tags, address, active."
for rep in $(seq 1 "$reps"); do
  for temperature in 0 1; do
    for arm in none object schema; do
      flags=()
      [ "$arm" = object ] && flags=(--json-object)
      [ "$arm" = schema ] && flags=(--json-schema "$schema")
      out=$("$sluice" run --model "$model" --chat --no-think --prompt "$prompt" --max-new "$new" \
        --temperature "$temperature" --seed 7 --stats --no-progress "${flags[@]}" "${extra[@]}" 2>&1 >/dev/null)
      decode=$(sed -n 's/.*generated=\([0-9]*\) .*decode=\([0-9.]*\) ms.*/\1 \2/p' <<<"$out")
      guided=$(grep -o 'masks=.*of decode)' <<<"$out" || echo "-")
      awk -v r="$rep" -v t="$temperature" -v a="$arm" -v g="$guided" '{ printf "rep %s T=%s %-6s %3d tokens, %.1f ms/token  %s\n", r, t, a, $1, $2 / ($1 > 1 ? $1 - 1 : 1), g }' <<<"$decode"
    done
  done
done
