#!/usr/bin/env bash
# End-to-end: `sluice export-gguf` files loaded and run by llama.cpp (the prebuilt CPU binary of
# node-llama-cpp 3.22.1, through bench/peer/llama.mjs): the trained default model (kimi_k3, MXFP4
# experts) and a make-tiny kimi_linear model. Greedy ids from llama.cpp are compared with
# `sluice run`: on the default model the first 16 tokens must agree for every fixture prompt (over 64
# tokens the first divergences measured were at tokens 29, 19 and none; llama.cpp rounds activations to BF16 for
# BF16 weights and to Q8_0 for MXFP4 experts, so long runs may part where the top two logits are
# close); on the tiny kimi_linear model the first 8. A llama.cpp loader error fails the test. Bad
# input gets one `sluice: error:` line and exit 1. node-llama-cpp is installed with npm into
# build/peer-e2e (or $SLUICE_NPM_CACHE/peer-e2e); prints SKIP and passes when node/npm or the registry is
# unavailable.
# Usage: export_gguf.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/lib/npm_deps.sh"
npm_deps peer-e2e "$src/bench/peer/package.json" node-llama-cpp --ignore-scripts
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=2
peer() { SLUICE_PEER_DIR="$deps" node "$src/bench/peer/llama.mjs" --threads "$threads" "$@"; }

# Bad input: one line, exit 1, no file.
expect_error() {
  local want=$1; shift
  set +e
  "$sluice" export-gguf "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "FAIL: export-gguf $* exited $rc (want 1)"; cat "$work/err"; exit 1; }
  [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "^sluice: error: .*$want" "$work/err" ||
    { echo "FAIL: export-gguf $*: expected one error line with '$want', got:"; cat "$work/err"; exit 1; }
}
expect_error "not a model directory" --model "$work/none" --out "$work/x.gguf"
expect_error "model_type 'qwen3' cannot be exported" --model "$src/models/default/draft-qwen3" --out "$work/x.gguf"
"$sluice" make-tiny --arch kimi_linear --out "$work/grouped" --vocab 4352 --q-lora 0 --experts 12 --expert-groups 3 --topk-groups 2 >/dev/null 2>&1
cp "$src/models/default/target/tiktoken.model" "$src/models/default/target/tokenizer_config.json" "$work/grouped/"
expect_error "cannot express grouped expert routing" --model "$work/grouped" --out "$work/x.gguf"
[ ! -e "$work/x.gguf" ] && [ ! -e "$work/x.gguf.tmp" ] || { echo "FAIL: a refused export left a file"; exit 1; }

# Compares greedy ids of sluice and llama.cpp; $1 model dir, $2 gguf, $3 prompt ids, $4 tokens, $5 required prefix.
compare() {
  local dir=$1 gguf=$2 ids=$3 n=$4 need=$5
  "$sluice" run --model "$dir" --prompt-ids "$ids" --max-new "$n" --ignore-eos --json 2>/dev/null >"$work/s.json"
  if ! peer --model "$gguf" --prompt-ids "$ids" --max-new "$n" --top 3 >"$work/l.json" 2>"$work/l.err"; then
    echo "FAIL: llama.cpp could not load or run $gguf:"; tail -5 "$work/l.err"; exit 1
  fi
  node -e '
    const fs = require("fs");
    const s = JSON.parse(fs.readFileSync(process.argv[1])), l = JSON.parse(fs.readFileSync(process.argv[2]));
    const need = +process.argv[3], a = s.generated_ids, b = l.generated;
    let div = a.findIndex((t, i) => t !== b[i]);
    const agree = div < 0 ? a.length : div;
    const sl = (a.length - 1) / (s.decode_ms / 1000);
    let line = `prompt ${s.prompt_ids.length} ids: greedy agreement ${agree}/${a.length}`;
    if (div >= 0) line += ` (first divergence at ${div}: sluice ${a[div]}, llama.cpp top3 ${JSON.stringify(l.top[div].map(([t, v]) => [t, +v.toFixed(3)]))})`;
    line += `; decode tok/s sluice ${sl.toFixed(0)}, llama.cpp ${l.decode_tok_s.toFixed(0)}`;
    console.log(line);
    if (agree < need) { console.log(`FAIL: fewer than ${need} greedy tokens agree`); process.exit(1); }
  ' "$work/s.json" "$work/l.json" "$need"
}

# The trained default model (kimi_k3), the fixture prompts.
"$sluice" export-gguf --model "$src/models/default/target" --out "$work/k3.gguf" --quiet
for text in "In the beginning God created the heaven and the earth. And the earth was" \
            "The Python interpreter has a number of functions" "Debian is a"; do
  ids=$("$sluice" tokenize --model "$src/models/default/target" --json "$text" | tr -d '[] \n')
  compare "$src/models/default/target" "$work/k3.gguf" "$ids" 32 16
done

# llama.cpp as a peer arm of `sluice bench run`: its events log is the harness's, its runs are
# valid, and on "Debian is a" (32 of 32 tokens agree above) the peer's first 8 tokens are sluice's.
ids=$("$sluice" tokenize --model "$src/models/default/target" --json "Debian is a" | tr -d '[] \n')
SLUICE_PEER_DIR="$deps" "$sluice" bench run --model "$src/models/default/target" --prompt-ids "$ids" --max-new 8 \
  --reps 1 --quiet --arm "sluice:--experts resident" \
  --arm "llama:--peer 'node $src/bench/peer/llama.mjs' --model $work/k3.gguf --threads $threads" \
  --out "$work/bench" >/dev/null 2>"$work/bench.err" || { echo "FAIL: bench run with the llama peer"; tail -5 "$work/bench.err"; exit 1; }
python3 - "$work/bench/results.json" <<'PY' || { echo "FAIL: the llama peer arm"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
runs = {x["group"]: x for x in r["runs"]}
assert all(x["valid"] for x in r["runs"]), [x["invalid_reason"] for x in r["runs"]]
assert runs["llama"]["peer"] and runs["llama"]["agree_prefix"] == 8, runs["llama"]
assert runs["llama"]["generated"] == 8 and runs["llama"]["steady_tps"] > 0 and runs["llama"]["max_rss_bytes"] > 0
print("bench peer arm: llama.cpp %.0f tok/s, sluice %.0f tok/s, same prefix %d of 8"
      % (runs["llama"]["steady_tps"], runs["sluice"]["steady_tps"], runs["llama"]["agree_prefix"]))
PY

# A make-tiny kimi_linear model with the default model's tokenizer.
"$sluice" make-tiny --arch kimi_linear --out "$work/lin" --vocab 4352 --q-lora 0 >/dev/null 2>&1
cp "$src/models/default/target/tiktoken.model" "$src/models/default/target/tokenizer_config.json" "$work/lin/"
"$sluice" export-gguf --model "$work/lin" --out "$work/lin.gguf" --quiet 2>/dev/null
compare "$work/lin" "$work/lin.gguf" "4096,300,400,500,600" 16 8
# Exactness of the export's semantics: with every tensor widened to F32 (--f32), llama.cpp computes
# without rounding activations, so its greedy tokens must equal sluice's and its logits must agree
# closely at every step (the 20 highest of each; measured at most 1.2e-3 on the tiny K3, 1.8e-3 on
# kimi_linear, whose kv_a_layernorm eps llama.cpp takes from rms_norm_eps, and 3.9e-4 on the default
# model). A mapping error (a missing norm, a wrong gate) moves logits by 1e-2 and more. The prompts
# are fixed: an expert whose router score nearly ties may flip between engines at 1e-4 and move
# later logits by 0.1 (seen on the tiny K3 with a 4-token prompt at step 12), which is not an error.
exact() {
  local dir=$1 ids=$2 name=$3
  "$sluice" export-gguf --model "$dir" --out "$work/$name.f32.gguf" --quiet --f32 2>/dev/null
  "$sluice" run --model "$dir" --prompt-ids "$ids" --max-new 16 --ignore-eos --experts resident --json --top-logits 20 \
    2>/dev/null >"$work/s.json"
  if ! peer --model "$work/$name.f32.gguf" --prompt-ids "$ids" --max-new 16 --top 20 >"$work/l.json" 2>"$work/l.err"; then
    echo "FAIL: llama.cpp could not load or run $name.f32.gguf:"; tail -5 "$work/l.err"; exit 1
  fi
  node -e '
    const fs = require("fs");
    const s = JSON.parse(fs.readFileSync(process.argv[1])), l = JSON.parse(fs.readFileSync(process.argv[2]));
    const name = process.argv[3];
    let worst = 0;
    s.top_logits.forEach((row, step) => {
      const peer = new Map(l.top[step]);
      for (const [id, v] of row) if (peer.has(id)) worst = Math.max(worst, Math.abs(v - peer.get(id)));
    });
    const same = JSON.stringify(s.generated_ids) === JSON.stringify(l.generated);
    console.log(`${name} --f32: greedy ${same ? "identical" : "DIFFERENT"} over ${s.generated_ids.length} tokens, largest logit difference ${worst.toExponential(2)}`);
    if (!same || worst > 5e-3) { console.log("FAIL: the F32 export does not compute what sluice computes"); process.exit(1); }
  ' "$work/s.json" "$work/l.json" "$name"
}
exact "$src/models/default/target" "4096,300,400" default
"$sluice" make-tiny --out "$work/k3t" --vocab 4352 --hidden 256 --latent 128 --seed 7 >/dev/null 2>&1
cp "$src/models/default/target/tiktoken.model" "$src/models/default/target/tokenizer_config.json" "$work/k3t/"
exact "$work/k3t" "5,6,7,8,9,10,11,12,13,14" tiny-k3
exact "$work/lin" "4096,300,400,500,600" tiny-kimi-linear
echo "PASS"
