#!/usr/bin/env bash
# End-to-end: `sluice info` on every architecture's tiny checkpoint and on the default model (text
# and --json, the JSON parsed by python3): model type, parameter counts equal to the checkpoint's
# own tensors counted independently, number formats by class, the expert bank, tokenizer and chat
# format, and a prepared model's homes; `sluice doctor` with and without a model (machine facts,
# each directory's O_DIRECT / io_uring / read rate, what fits, warnings that match the probes).
# Usage: doctor_info.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
python3() { if [ -x /usr/bin/python3 ]; then /usr/bin/python3 "$@"; else command python3 "$@"; fi; }

# check JSON-FILE PYTHON-ASSERTS...: each argument a Python expression over j (the parsed file) and
# d (the model directory, when the JSON came from info).
check() {
  python3 - "$@" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
d = j.get("model_dir", "")
for expr in sys.argv[2:]:
    if not eval(expr):
        print("FAIL: %s is false for %s" % (expr, sys.argv[1]), file=sys.stderr)
        sys.exit(1)
PY
}

# The checkpoint's parameters counted from its safetensors headers alone: every tensor but the
# scales and shapes, an MXFP4 byte (U8 packed/blocks) counting two, an INT4 int32 eight.
count_params() {
  python3 - "$1" <<'PY'
import glob, json, math, os, struct, sys
total = 0
for f in glob.glob(os.path.join(sys.argv[1], "*.safetensors")):
    if os.path.basename(f) == "expected.safetensors":
        continue
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
    for name, t in header.items():
        if name == "__metadata__" or name.endswith(("scale_inv", "_scale", "_scales", "weight_scale")):
            continue
        numel = math.prod(t["shape"])
        if name.endswith("weight_shape"):
            continue
        total += 2 * numel if t["dtype"] == "U8" else 8 * numel if t["dtype"] == "I32" else numel
print(total)
PY
}

declare -A routed_format=([k3_tiny_a]=MXFP4 [kimi_linear_a]=BF16 [qwen3_moe_a]=BF16 [gpt_oss_a]=MXFP4
                          [deepseek_v3_a]=FP8_E4M3 [kimi_k2_b]=BF16 [kimi_k2_int4]=INT4_G32)
for name in k3_tiny_a kimi_linear_a qwen3_a qwen3_moe_a gpt_oss_a deepseek_v3_a kimi_k2_b kimi_k2_int4; do
  dir="$src/tests/fixtures/$name"
  "$sluice" info --model "$dir" >"$work/info.txt" || fail "info $name"
  grep -q '^architecture' "$work/info.txt" || fail "info $name: no architecture line: $(cat "$work/info.txt")"
  "$sluice" info --model "$dir" --json >"$work/info.json" || fail "info --json $name"
  want_type=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model_type'])" "$dir/config.json")
  params=$(count_params "$dir")
  check "$work/info.json" "j['model_type'] == '$want_type'" "j['parameters']['total'] == $params" \
    "0 < j['parameters']['active_per_token'] <= j['parameters']['total']" \
    "j['parameters']['routed_experts'] <= j['parameters']['total']" \
    "j['tokenizer'] is None and j['prepared'] is None and j['checkpoint']['shards'] >= 1" \
    "j['resident_bytes'] > 0 and all(c['bytes'] > 0 for c in j['tensor_classes'])"
  if [ -n "${routed_format[$name]:-}" ]; then
    check "$work/info.json" "j['quantization']['routed experts'].split('+')[0] == '${routed_format[$name]}'" \
      "j['expert_bank']['moe_layers'] > 0 and j['expert_bank']['record_bytes'] > 0" \
      "j['expert_bank']['total_bytes'] == j['expert_bank']['moe_layers'] * j['expert_bank']['experts_per_layer'] * j['expert_bank']['record_bytes']" \
      "j['parameters']['routed_experts'] == j['parameters']['per_expert'] * j['expert_bank']['moe_layers'] * j['expert_bank']['experts_per_layer']" \
      "j['parameters']['active_per_token'] == j['parameters']['total'] - j['parameters']['routed_experts'] + j['expert_bank']['moe_layers'] * j['expert_bank']['experts_per_token'] * j['parameters']['per_expert']"
  else
    check "$work/info.json" "j['expert_bank'] is None" "j['parameters']['active_per_token'] == j['parameters']['total']"
  fi
done
check_fp8() { check "$work/info.json" "j['quantization']['attention'].split('+')[0] == 'FP8_E4M3'" "'scales' in [f for c in j['tensor_classes'] for f in c['formats']]"; }
"$sluice" info --model "$src/tests/fixtures/deepseek_v3_a" --json >"$work/info.json"
check_fp8

# The default model has a tokenizer and a chat format.
"$sluice" info --model "$src/models/default/target" --json >"$work/info.json"
check "$work/info.json" "j['tokenizer']['chat_format'] == 'kimi_k3' and j['tokenizer']['vocab_size'] > 0"

# A prepared model: its homes, every expert once.
cp -r "$src/tests/fixtures/k3_tiny_a" "$work/m"
"$sluice" prepare --model "$work/m" --home "$work/h0" --home "$work/h1" --no-measure 2>/dev/null || fail "prepare"
"$sluice" info --model "$work/m" >"$work/info.txt"
grep -q '^prepared     2 homes' "$work/info.txt" || fail "info of a prepared model: $(cat "$work/info.txt")"
"$sluice" info --model "$work/m" --json >"$work/info.json"
check "$work/info.json" "len(j['prepared']['homes']) == 2 and all(h['exists'] for h in j['prepared']['homes'])" \
  "sum(h['experts'] for h in j['prepared']['homes']) == j['expert_bank']['moe_layers'] * j['expert_bank']['experts_per_layer']" \
  "j['prepared']['replicas']['min'] == 1 and j['prepared']['experts_not_local'] == 0"

# A striped install: every record in one part per home; info says so, verify checks each part.
cp -r "$src/tests/fixtures/qwen3_moe_b" "$work/s"
rm -f "$work/s/expected.safetensors"
"$sluice" prepare --model "$work/s" --home "$work/s0" --home "$work/s1" --stripe on --no-measure 2>/dev/null ||
  fail "prepare --stripe on"
"$sluice" info --model "$work/s" >"$work/info-s.txt"
grep -q '^prepared     2 homes, 1.00 copies per expert (min 1, max 1), each striped in 2 parts' "$work/info-s.txt" ||
  fail "info of a striped install: $(cat "$work/info-s.txt")"
"$sluice" info --model "$work/s" --json >"$work/info-s.json"
check "$work/info-s.json" "j['prepared']['stripes'] == 2 and j['prepared']['replicas']['max'] == 1" \
  "all(h['experts'] == j['expert_bank']['moe_layers'] * j['expert_bank']['experts_per_layer'] for h in j['prepared']['homes'])"
"$sluice" verify --model "$work/s" 2>/dev/null || fail "verify of a striped install"
python3 - "$(find "$work/s1" -name '*.bin' | head -1)" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100)
    b = f.read(1)
    f.seek(100)
    f.write(bytes([b[0] ^ 0x5a]))
PY
if "$sluice" verify --model "$work/s" 2>"$work/verify-s.txt"; then fail "verify missed a damaged stripe"; fi
grep -q "checksum mismatch" "$work/verify-s.txt" || fail "verify of a damaged stripe: $(cat "$work/verify-s.txt")"
err=$("$sluice" prepare --model "$work/s" --home "$work/s9" --stripe on --no-measure 2>&1) && fail "--stripe on, one home"
grep -q "two or more homes" <<<"$err" || fail "--stripe on with one home: $err"

# Doctor without a model: the machine and the working directory.
(cd "$work" && "$sluice" doctor --seconds 0.1 >"$work/doctor.txt") || fail "doctor"
grep -q '^cpu' "$work/doctor.txt" && grep -q '^memory' "$work/doctor.txt" || fail "doctor text: $(cat "$work/doctor.txt")"
(cd "$work" && "$sluice" doctor --seconds 0.1 --json >"$work/doctor.json") || fail "doctor --json"
check "$work/doctor.json" "j['cpu']['threads'] >= 1 and j['cpu']['active_isa'] in j['cpu']['isas']" \
  "j['memory']['total_bytes'] >= j['memory']['available_bytes'] > 0" \
  "len(j['dirs']) == 1 and j['dirs'][0]['exists'] and j['dirs'][0]['role'] == 'working directory'" \
  "'model' not in j and isinstance(j['gpus'], list)"

# Doctor with the prepared model and an oversized cache: both homes and the model directory
# probed; the warnings match the probes.
"$sluice" doctor --model "$work/m" --cache-gb 100000 --seconds 0.1 --json >"$work/doctor.json" || fail "doctor --model"
check "$work/doctor.json" \
  "sorted(x['role'] for x in j['dirs']) == ['model directory', 'prepared home', 'prepared home']" \
  "all(('no O_DIRECT on ' + x['path'] in ' '.join(j['warnings'])) == (not x['o_direct']) for x in j['dirs'])" \
  "all(x['read_bytes_per_s'] > 0 for x in j['dirs'] if x['role'] == 'prepared home' and x['o_direct'])" \
  "any('--cache-gb' in w for w in j['warnings'])" \
  "j['model']['advice']['prepared'] and j['model']['advice']['resident_fits_ram']" \
  "j['model']['advice']['whole_bank_fits'] == (j['model']['advice']['suggested_cache_gb'] * 1e9 >= j['model']['facts']['expert_bank']['total_bytes'])" \
  "j['model']['advice']['io_floor']['bytes_per_token_uncached'] == j['model']['facts']['expert_bank']['bytes_per_token']"
"$sluice" doctor --model "$work/m" --seconds 0.1 >"$work/doctor.txt" || fail "doctor --model text"
grep -q '^cache        suggested --cache-gb' "$work/doctor.txt" || fail "doctor text: $(cat "$work/doctor.txt")"

# A dense model: nothing to stream.
"$sluice" doctor --model "$src/tests/fixtures/qwen3_a" --seconds 0.1 --json >"$work/doctor.json"
check "$work/doctor.json" "'suggested_cache_gb' not in j['model']['advice']"
# The GPU/CPU split's calibration (what the first streamed run on a GPU measures): none yet, one
# stored (shown in text and JSON), and a file that is not one (a warning naming it).
export SLUICE_CALIBRATION="$work/cal/rates.json"
"$sluice" doctor --seconds 0.1 >"$work/doctor.txt"
grep -q "^hybrid       not measured yet .*$work/cal/rates.json" "$work/doctor.txt" || fail "doctor without a calibration: $(cat "$work/doctor.txt")"
mkdir -p "$work/cal"
printf '{"format": "sluice-hybrid-rates", "version": 1, "rates": {"MXFP4 8x64 MXFP4 8x64 MXFP4 64x8, 16 threads on cuda:0": {"link": 55e9, "cores": 94e9, "link_shared": 51e9, "cores_shared": 80e9}}}\n' >"$SLUICE_CALIBRATION"
"$sluice" doctor --seconds 0.1 >"$work/doctor.txt"
grep -q '^hybrid       MXFP4 8x64 .* on cuda:0: link 55.0 GB/s, cores 94.0 GB/s alone; 51.0 + 80.0 at once' "$work/doctor.txt" ||
  fail "doctor with a calibration: $(cat "$work/doctor.txt")"
"$sluice" doctor --seconds 0.1 --json >"$work/doctor.json"
check "$work/doctor.json" "list(j['hybrid_calibration']['rates'].values())[0]['cores_shared'] == 80e9"
echo '{"format": "other"}' >"$SLUICE_CALIBRATION"
"$sluice" doctor --seconds 0.1 --json >"$work/doctor.json"
check "$work/doctor.json" "any('$work/cal/rates.json: not a hybrid calibration' in w for w in j['warnings'])"
unset SLUICE_CALIBRATION
echo "doctor_info: ok"
