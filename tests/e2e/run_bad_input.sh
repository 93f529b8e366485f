#!/usr/bin/env bash
# Bad checkpoints and configs given to `sluice run` must give a one-line error naming the file
# and tensor or field, exit 1, and never crash or hang; bad option values are usage errors (exit
# 2) naming the option and the value. Usage: run_bad_input.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

make_model() {  # a fresh single-shard tiny K3 checkpoint in $work/$1
  rm -rf "$work/$1"
  "$sluice" make-tiny --arch kimi_k3 --out "$work/$1" --shards 1 --seed 3 2>/dev/null
}

expect_error() {  # name, model dir, substring... [--cache-gb GB: run with that budget]
  local name=$1 dir=$2
  shift 2
  local extra=()
  if [ $# -ge 2 ] && [ "${*: -2:1}" = "--cache-gb" ]; then
    extra=(--cache-gb "${*: -1}")
    set -- "${@:1:$(($# - 2))}"
  fi
  local out rc=0
  out=$(timeout 60 "$sluice" run --model "$dir" --prompt-ids 1,2,3 --max-new 2 "${extra[@]}" 2>&1 >/dev/null) || rc=$?
  local ok=1
  [ "$rc" -eq 1 ] || { echo "FAIL $name: exit code $rc (want 1)"; ok=0; }
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL $name: error is not one line: $out"; ok=0; }
  case "$out" in "sluice: error: "*) ;; *) echo "FAIL $name: not a sluice error: $out"; ok=0 ;; esac
  for want in "$@"; do
    case "$out" in *"$want"*) ;; *) echo "FAIL $name: message lacks '$want': $out"; ok=0 ;; esac
  done
  if [ $ok -eq 1 ]; then echo "ok   $name: $out"; else failures=$((failures + 1)); fi
}

# Rewrites the safetensors header of $1 with python: $2 is a python expression over `h` (the dict).
edit_header() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
path, expr = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
h = json.loads(data[8:8 + n])
exec(expr)
text = json.dumps(h).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
open(path, 'wb').write(struct.pack('<Q', len(text)) + text + data[8 + n:])
PY
}

make_model m1
size=$(stat -c %s "$work/m1/model.safetensors")
truncate -s $((size - 1000)) "$work/m1/model.safetensors"
expect_error "truncated shard" "$work/m1" "model.safetensors"

make_model m2
printf '\xff\xff\xff\x00\x00\x00\x00\x00' | dd of="$work/m2/model.safetensors" bs=1 count=8 conv=notrunc 2>/dev/null
expect_error "header length past end of file" "$work/m2" "model.safetensors" "header"

make_model m3
edit_header "$work/m3/model.safetensors" "k='language_model.lm_head.weight'; h[k]['data_offsets'][1] += 10**9"
expect_error "tensor offsets outside the file" "$work/m3" "model.safetensors" "language_model.lm_head.weight"

make_model m4
edit_header "$work/m4/model.safetensors" "h['language_model.lm_head.weight']['dtype'] = 'F16'"
expect_error "dtype the model cannot use" "$work/m4" "language_model.lm_head.weight" "F16"

make_model m5
edit_header "$work/m5/model.safetensors" "h['language_model.lm_head.weight']['shape'] = [256, 128]"
expect_error "shape disagrees with the config" "$work/m5" "language_model.lm_head.weight" "shape"

make_model m6
edit_header "$work/m6/model.safetensors" "del h['language_model.model.layers.2.self_attn.b_proj.weight']"
expect_error "missing tensor" "$work/m6" "language_model.model.layers.2.self_attn.b_proj.weight"

make_model m7
sed -i 's/"hidden_size": 64/"hidden_size": -64/' "$work/m7/config.json"
expect_error "negative size in config" "$work/m7" "config.json" "hidden_size"

make_model m8
sed -i 's/"rms_norm_eps": 1e-05/"rms_norm_eps": NaN/' "$work/m8/config.json"
expect_error "NaN in config" "$work/m8" "config.json"


expect_error "missing model directory" "$work/does-not-exist" "does-not-exist"

make_model m9
out=$("$sluice" run --model "$work/m9" --prompt-ids 1,99999 --max-new 1 2>&1 >/dev/null) && rc=0 || rc=$?
case "$out" in *"token id 99999"*) echo "ok   token outside vocabulary: $out" ;;
  *) echo "FAIL token outside vocabulary: rc=$rc $out"; failures=$((failures + 1)) ;; esac

# Usage errors (exit 2, one line naming the option and the value), checked at parse time.
expect_usage() {  # name, substring, sluice args...
  local name=$1 want=$2
  shift 2
  local out rc=0
  out=$("$sluice" "$@" 2>&1 >/dev/null) || rc=$?
  local first=${out%%$'\n'*}  # the first line, without a pipe (head closing early meets pipefail)
  if [ "$rc" -eq 2 ] && case "$first" in *"$want"*) true ;; *) false ;; esac; then
    echo "ok   $name: $first"
  else
    echo "FAIL $name: exit $rc (want 2), message lacks '$want': $out"
    failures=$((failures + 1))
  fi
}
make_model u1
expect_usage "queue depth past the reader's limit" "--queue-depth: 32768 is outside 1..256" \
  run --model "$work/u1" --prompt-ids 1,2 --queue-depth 32768
expect_usage "unknown reader engine" "--reader: 'bogus' is not one of auto, io_uring, pread" \
  run --model "$work/u1" --prompt-ids 1,2 --reader bogus
expect_usage "capacity that is not a size" "/x:abc: capacity: 'abc' is not a size" \
  prepare --model "$work/u1" --home "$work/x:abc"
expect_usage "hex count" "--max-new: '0x10' is not a decimal integer" run --model "$work/u1" --prompt-ids 1 --max-new 0x10
expect_usage "infinite cache" "--cache-gb: 'inf' is not a decimal number" run --model "$work/u1" --prompt-ids 1 --cache-gb inf
expect_usage "unknown experts mode" "--experts: 'both' is not one of" run --model "$work/u1" --prompt-ids 1 --experts both
expect_usage "top-p above 1" "--top-p: 1.5 is outside 0..1" run --model "$work/u1" --prompt-ids 1 --top-p 1.5
expect_usage "host share above 1" "--cpu-experts: 1.5 is outside 0..1" run --model "$work/u1" --prompt-ids 1 --cpu-experts 1.5
expect_usage "host share neither auto nor a number" "--cpu-experts: 'half' is not a decimal number" \
  run --model "$work/u1" --prompt-ids 1 --cpu-experts half
expect_usage "negative retries" "--retries: -1 is outside 0..1000" setup --source "$work/u1" --model "$work/u1b" --full --retries -1
# serve's numeric and enumerated options go through the same validators (checked before loading).
expect_usage "serve: infinite cache" "--cache-gb: 'inf' is not a decimal number" serve --model "$work/u1" --cache-gb inf
expect_usage "serve: zero cache" "--cache-gb: 0 is not positive" serve --model "$work/u1" --cache-gb 0
expect_usage "serve: port in exponent form" "--port: '8e3' is not a decimal integer" serve --model "$work/u1" --port 8e3
expect_usage "serve: port past 65535" "--port: 65536 is outside 0..65535" serve --model "$work/u1" --port 65536
expect_usage "serve: hex header timeout" "--header-timeout: '0x5' is not a decimal integer" serve --model "$work/u1" --header-timeout 0x5
expect_usage "serve: hex max tokens" "--max-tokens: '0x10' is not a decimal integer" serve --model "$work/u1" --max-tokens 0x10
expect_usage "serve: queue past 64" "--queue: 65 is outside 0..64" serve --model "$work/u1" --queue 65
expect_usage "serve: negative host share" "--cpu-experts: -1 is outside 0..1" serve --model "$work/u1" --cpu-experts -1
expect_usage "serve: unknown experts mode" "--experts: 'both' is not one of" serve --model "$work/u1" --experts both

# `sluice tokenize --chat` on a file nested 100,000 deep: one line naming the file and the depth
# limit, exit 1 (it used to overflow the stack).
python3 -c "print('[{\"role\":\"user\",\"content\":' + '[' * 100000 + ']' * 100000 + '}]')" >"$work/deep_chat.json"
out=$("$sluice" tokenize --model "$2/models/default/target" --chat "$work/deep_chat.json" 2>&1 >/dev/null) && rc=0 || rc=$?
case "$rc:$out" in 1:*"deep_chat.json: JSON nested deeper than the limit of 256 levels") echo "ok   deep chat file: $out" ;;
  *) echo "FAIL deep chat file: rc=$rc $(printf '%s' "$out" | head -c 300)"; failures=$((failures + 1)) ;; esac

# A prompt longer than --max-context allows is refused with one line (text stops being encoded
# once it is too long).
out=$("$sluice" run --model "$work/u1" --prompt-ids 1,2,3,4 --max-context 4 2>&1 >/dev/null) && rc=0 || rc=$?
case "$rc:$out" in 1:*"the prompt has more than 3 tokens: --max-context 4"*) echo "ok   prompt past --max-context: $out" ;;
  *) echo "FAIL prompt past --max-context: rc=$rc $out"; failures=$((failures + 1)) ;; esac

# A cache budget past physical memory is refused with the numbers (not "internal error: bad_alloc").
make_model c1
"$sluice" prepare --model "$work/c1" --home "$work/c1-home" --no-measure 2>/dev/null
expect_error "cache budget past physical memory" "$work/c1" "--cache-gb" "100000 GB" "GB of memory" --cache-gb 100000

# A FIFO in a shard's place is refused by name instead of blocking `run` forever.
make_model f1
rm "$work/f1/model.safetensors"
mkfifo "$work/f1/model.safetensors"
expect_error "FIFO in place of a shard" "$work/f1" "model.safetensors" "FIFO"

if [ $failures -ne 0 ]; then
  echo "$failures bad-input case(s) failed"
  exit 1
fi
echo "all bad-input cases gave clear errors"
