#!/usr/bin/env bash
# bench/tool_calls.py on a model of every chat family: the default model (Kimi K3 format, trained),
# and random tiny checkpoints (make-tiny) with each family's real vocabulary size and tokenizer:
#   qwen3        qwen3_moe, Qwen3's tokenizer.json (151,669 tokens; the model's 151,936 rows)
#   deepseek_v3  deepseek_v3, DeepSeek-V3's tokenizer.json (129,280 rows)
#   kimi_k2      kimi_k2, a K2 layout: the first 163,584 o200k ranks with K2's specials at their
#                real ids (Kimi's own tiktoken.model is not fetchable here; same size and layout)
#   gpt_oss      gpt_oss, o200k_base ranks with harmony's specials at their real ids (201,088 rows;
#                the reserved ids past 200,253 left out)
# (the tokenizers of tests/unit/chat_format_tokenizers.h, as model directories). A random model
# chooses among the tokens the grammar allows about as a random walk does, so these runs check the
# constraint and each format's parser on the real vocabularies, not a model's judgement.
# Usage: bench/tool_call_families.sh SLUICE WORKDIR [CALLS] [FAMILIES...]
# Needs the tokenizer data (scripts/fetch-tokenizer-data.sh) and python3 with jsonschema.
set -euo pipefail
sluice=$1
work=$2
calls=${3:-500}
shift $(($# < 3 ? $# : 3))
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(k3 qwen3 deepseek_v3 kimi_k2 gpt_oss)
root=$(cd "$(dirname "$0")/.." && pwd)
data=${SLUICE_TOKENIZER_DATA:-$root/build/tokenizer-data}
"$root/scripts/fetch-tokenizer-data.sh" "$data" >/dev/null
mkdir -p "$work"

specials_config() {  # FAMILY OUT: tokenizer_config.json with the family's specials
  python3 - "$1" "$2" <<'PY'
import json, sys
family, out = sys.argv[1], sys.argv[2]
if family == "gpt_oss":
    named = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
             200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>",
             200012: "<|call|>", 200018: "<|endofprompt|>"}
    # The rest of o200k_harmony's reserved ids up to 201,087 are left out: a tiktoken.model's added
    # tokens must sit in the 256 ids after its ranks; the model's rows past them spell nothing.
    for i in list(range(200000, 200002)) + [200004, 200009, 200010, 200011] + list(range(200013, 200254)):
        named.setdefault(i, "<|reserved_%d|>" % i)
else:  # kimi_k2
    named = {163584: "[BOS]", 163585: "[EOS]", 163586: "<|im_end|>", 163587: "<|im_user|>",
             163588: "<|im_assistant|>", 163590: "<|start_header_id|>", 163591: "<|end_header_id|>",
             163593: "[EOT]", 163594: "<|im_system|>", 163595: "<|tool_calls_section_begin|>",
             163596: "<|tool_calls_section_end|>", 163597: "<|tool_call_begin|>",
             163598: "<|tool_call_argument_begin|>", 163599: "<|tool_call_end|>", 163601: "<|im_middle|>",
             163602: "<|media_begin|>", 163603: "<|media_content|>", 163604: "<|media_end|>",
             163605: "<|media_pad|>", 163606: "<think>", 163607: "</think>", 163838: "[UNK]", 163839: "[PAD]"}
json.dump({"added_tokens_decoder": {str(k): {"content": v, "special": True} for k, v in sorted(named.items())}},
          open(out, "w"))
PY
}

set_special_ids() {  # DIR BOS EOS GENERATION_EOS...: the family's real ids (make-tiny's are its vocabulary's last)
  python3 - "$@" <<'PY'
import json, sys
d, bos, eos, gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(x) for x in sys.argv[4:]]
for name, value in (("config.json", eos), ("generation_config.json", gen if len(gen) > 1 else gen[0])):
    c = json.load(open(d + "/" + name))
    c["bos_token_id"], c["eos_token_id"] = bos, value
    json.dump(c, open(d + "/" + name, "w"), indent=1)
PY
}

model_for() {  # FAMILY -> prints the model directory (written once)
  local f=$1 dir="$work/$1"
  if [ "$f" = k3 ]; then echo "$root/models/default/target"; return; fi
  if [ ! -f "$dir/config.json" ]; then
    case $f in
      qwen3) "$sluice" make-tiny --arch qwen3_moe --vocab 151936 --out "$dir" >&2
        cp "$data/qwen3/tokenizer.json" "$data/qwen3/tokenizer_config.json" "$dir/"
        set_special_ids "$dir" 151643 151645 151645 151643 ;;
      deepseek_v3) "$sluice" make-tiny --arch deepseek_v3 --vocab 129280 --out "$dir" >&2
        cp "$data/deepseek_v3/tokenizer.json" "$data/deepseek_v3/tokenizer_config.json" "$dir/"
        set_special_ids "$dir" 0 1 1 ;;
      kimi_k2) "$sluice" make-tiny --arch kimi_k2 --vocab 163840 --out "$dir" >&2
        head -n 163584 "$data/o200k_base.tiktoken" >"$dir/tiktoken.model"
        specials_config kimi_k2 "$dir/tokenizer_config.json"
        set_special_ids "$dir" 163584 163585 163586 163585 ;;
      gpt_oss) "$sluice" make-tiny --arch gpt_oss --vocab 201088 --out "$dir" >&2
        cp "$data/o200k_base.tiktoken" "$dir/tiktoken.model"
        specials_config gpt_oss "$dir/tokenizer_config.json"
        set_special_ids "$dir" 199998 200002 200002 199999 200012 ;;
      *) echo "unknown family $f" >&2; exit 2 ;;
    esac
  fi
  echo "$dir"
}

status=0
for f in "${families[@]}"; do
  model=$(model_for "$f")
  format=()
  effort=none
  [ "$f" = kimi_k2 ] && format=(--chat-format kimi_k2)
  [ "$f" = gpt_oss ] && effort=low  # gpt-oss always reasons
  echo "== $f ($model)"
  python3 "$root/bench/tool_calls.py" "$sluice" "$model" --calls "$calls" --reasoning-effort "$effort" \
    --json "$work/$f.json" -- "${format[@]}" ||
    status=1
done
exit $status
