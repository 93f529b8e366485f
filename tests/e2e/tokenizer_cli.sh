#!/usr/bin/env bash
# End-to-end: `sluice tokenize` / `sluice detokenize` on real rank files and tokenizer.json (fetched by
# scripts/fetch-tokenizer-data.sh), K3-layout, DeepSeek-V3 and Kimi K2 model directories with --chat
# (formats and template revisions detected from the directory), byte-exact round trips
# through stdin (NUL, invalid UTF-8), and one-line errors (exit 1) for bad files and arguments.
# Usage: tokenizer_cli.sh <sluice-binary> <source-dir>. Prints SKIP and exits 77 (skipped) when offline.
set -euo pipefail
sluice=$1
src=$2
data=${SLUICE_TOKENIZER_DATA:-$src/build/tokenizer-data}
if ! bash "$src/scripts/fetch-tokenizer-data.sh" "$data"; then
  echo "SKIP: tokenizer data absent (offline?); run scripts/fetch-tokenizer-data.sh"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Ids from the committed oracle fixture (tiktoken 0.14) for "hello world".
want=$(python3 -c "import json,sys; c=[e for e in json.load(open(sys.argv[1])) if e['text']=='hello world'][0]; print(' '.join(map(str,c['ids']['o200k_base'])))" \
  "$src/tests/fixtures/tokenizer/edge_cases.json")
got=$("$sluice" tokenize --tiktoken "$data/o200k_base.tiktoken" --pattern o200k_base "hello world")
[ "$got" = "$want" ] || fail "o200k ids for 'hello world': got '$got', want '$want'"

# Byte-exact round trips through stdin/stdout, with NUL and invalid UTF-8, for every format.
printf 'tab\there \x00 nul \xff\xfe bad \xe4\xb8 cut \xf0\x9f\x8c\x8d emoji\n\n  end' >"$work/input.bin"
for args in "--tiktoken $data/cl100k_base.tiktoken --pattern cl100k_base" \
            "--tiktoken $data/o200k_base.tiktoken --pattern kimi_k3" \
            "--tokenizer-json $data/deepseek_v3/tokenizer.json" \
            "--tokenizer-json $data/qwen3/tokenizer.json"; do
  # shellcheck disable=SC2086
  "$sluice" tokenize $args <"$work/input.bin" >"$work/ids.txt"
  # shellcheck disable=SC2086
  "$sluice" detokenize $args <"$work/ids.txt" >"$work/output.bin"
  cmp -s "$work/input.bin" "$work/output.bin" || fail "round trip differs for: $args"
done

# A K3-layout model directory: o200k ranks as tiktoken.model, K3 specials in tokenizer_config.json.
model=$work/model
mkdir -p "$model"
cp "$data/o200k_base.tiktoken" "$model/tiktoken.model"
cat >"$model/tokenizer_config.json" <<'JSON'
{"added_tokens_decoder": {"199998": {"content": "[BOS]", "special": true}, "199999": {"content": "[EOS]", "special": true},
 "200000": {"content": "<|end_of_msg|>", "special": true}, "200001": {"content": "<|open|>", "special": true},
 "200002": {"content": "<|close|>", "special": true}, "200003": {"content": "<|sep|>", "special": true}}}
JSON
cat >"$work/chat.json" <<'JSON'
{"messages": [{"role": "user", "content": "Hello <|open|> & goodbye"}], "thinking_effort": "high"}
JSON
"$sluice" tokenize --model "$model" --chat "$work/chat.json" --rendered >"$work/rendered.txt"
grep -q 'thinking_effort=high`.<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hello <|open|> & goodbye' \
  "$work/rendered.txt" || fail "K3 render: $(cat "$work/rendered.txt")"
"$sluice" tokenize --model "$model" --chat "$work/chat.json" >"$work/chat_ids.txt"
opens=$(tr ' ' '\n' <"$work/chat_ids.txt" | grep -c '^200001$' || true)
[ "$opens" = 4 ] || fail "K3 render has $opens <|open|> ids, want 4 (user text must stay ordinary)"
"$sluice" detokenize --model "$model" <"$work/chat_ids.txt" >"$work/chat_text.txt"
cmp -s "$work/chat_text.txt" "$work/rendered.txt" || fail "detokenized chat ids differ from the rendered text"

# DeepSeek-V3 and Kimi K2 model directories: the chat format and its revision come from the tokenizer
# and the model's own template, and the render equals the jinja2 oracle's (chat_template_cases.json).
# case_file TEMPLATE N OUT: the Nth conversation rendered with TEMPLATE, as a chat file + OUT.expected.
case_file() {
  python3 - "$src/tests/fixtures/tokenizer/chat_template_cases.json" "$1" "$2" "$3" <<'PY'
import json, sys
fx = json.load(open(sys.argv[1], encoding="utf-8"))
case = [c for c in fx["cases"] if c["template"] == sys.argv[2]][int(sys.argv[3])]
doc = {k: v for k, v in case.items() if k not in ("template", "text")}
if "tools" in doc:
    doc["tools"] = fx["tool_sets"][doc["tools"]]
doc.setdefault("add_generation_prompt", False)
json.dump(doc, open(sys.argv[4], "w", encoding="utf-8"), ensure_ascii=False)
open(sys.argv[4] + ".expected", "w", encoding="utf-8").write(case["text"])
PY
}
check_render() {  # MODEL_DIR TEMPLATE N
  case_file "$2" "$3" "$work/case.json"
  "$sluice" tokenize --model "$1" --chat "$work/case.json" --rendered >"$work/case.txt"
  cmp -s "$work/case.txt" "$work/case.json.expected" || fail "$2 case $3 from $1 renders differently: $(cat "$work/case.txt")"
}
ds=$work/deepseek
mkdir -p "$ds"
cp "$data/deepseek_v3/tokenizer.json" "$data/deepseek_v3/tokenizer_config.json" "$ds/"  # the Dec 2024 template
check_render "$ds" deepseek_v3 4
check_render "$ds" deepseek_v3 7
cp "$src/tests/fixtures/tokenizer/templates/deepseek-ai-DeepSeek-V3-0324.jinja" "$ds/chat_template.jinja"
check_render "$ds" deepseek_v3_0324 4
k2=$work/kimi_k2
mkdir -p "$k2"
head -n 163584 "$data/o200k_base.tiktoken" >"$k2/tiktoken.model"  # o200k ranks in the place of Kimi's
python3 - "$src/tests/fixtures/tokenizer/templates/moonshotai-Kimi-K2-Instruct.jinja" "$k2/tokenizer_config.json" <<'PY'
import json, sys
names = {163584: "[BOS]", 163585: "[EOS]", 163586: "<|im_end|>", 163587: "<|im_user|>", 163588: "<|im_assistant|>",
         163594: "<|im_system|>", 163595: "<|tool_calls_section_begin|>", 163596: "<|tool_calls_section_end|>",
         163597: "<|tool_call_begin|>", 163598: "<|tool_call_argument_begin|>", 163599: "<|tool_call_end|>",
         163601: "<|im_middle|>", 163606: "<think>", 163607: "</think>"}
config = {"added_tokens_decoder": {str(i): {"content": n, "special": True} for i, n in names.items()},
          "chat_template": open(sys.argv[1], encoding="utf-8").read()}
json.dump(config, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
check_render "$k2" kimi_k2 6
"$sluice" tokenize --model "$k2" --format kimi_k2_thinking --chat "$work/case.json" --rendered >"$work/case.txt"
grep -q '<think></think>' "$work/case.txt" || fail "--format kimi_k2_thinking did not override the model's template"

# Errors: one line naming the file/field, exit status 1 (never a crash or an internal error).
expect_error() {
  local pattern=$1
  shift
  local status=0
  "$@" >"$work/out.txt" 2>"$work/err.txt" </dev/null || status=$?
  [ "$status" = 1 ] || fail "expected exit 1, got $status: $* ($(cat "$work/err.txt"))"
  grep -q -- "$pattern" "$work/err.txt" || fail "expected '$pattern' in: $(cat "$work/err.txt")"
}
head -c 5000 "$data/o200k_base.tiktoken" >"$work/truncated.tiktoken"
expect_error "truncated.tiktoken:" "$sluice" tokenize --tiktoken "$work/truncated.tiktoken" x
printf 'IQ== 0\nIQ== 1\n' >"$work/dup.tiktoken"
expect_error "dup.tiktoken:2: token bytes of rank 1 duplicate" "$sluice" tokenize --tiktoken "$work/dup.tiktoken" x
expect_error "cannot open" "$sluice" tokenize --tiktoken "$work/missing.tiktoken" x
expect_error "no tokenizer files" "$sluice" tokenize --model "$work" x
printf '{"model": {"type": "Unigram"}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}' >"$work/bad.json"
expect_error "unsupported model type 'Unigram'" "$sluice" tokenize --tokenizer-json "$work/bad.json" x
printf '[{"role": "user", "content": 5}]' >"$work/badchat.json"
expect_error "content" "$sluice" tokenize --model "$model" --chat "$work/badchat.json"
printf '{"messages": [], "add_generation_prompt": "yes"}' >"$work/badopt.json"
expect_error "wrong JSON type" "$sluice" tokenize --model "$model" --chat "$work/badopt.json"
expect_error "id 999999999 is not in the vocabulary" "$sluice" detokenize --model "$model" 1 999999999
expect_error "unexpected character" "$sluice" detokenize --model "$model" 1 x2
echo "tokenizer_cli: ok"
