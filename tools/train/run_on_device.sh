#!/usr/bin/env bash
# The one command run on the GPU machine (device tool) to build the default model pair: trains the
# tokenizer (tok_train.py) on the corpus carried in .carry/train (made by make_corpus.sh), then
# pipeline.py trains, exports and measures the target and the draft. Preparation stops at the first
# error; training and later stages are guarded so that a late failure still returns what earlier
# stages wrote. Returns under $OUT: log.txt, summary.json, and artifacts.tar split into parts of at
# most 15 MiB (artifacts.tar.part-aa, -ab, ...; `cat artifacts.tar.part-* | tar x` restores
# models/default/, tests/fixtures/default_target/ and tools/train/results/).
# Time: RUN_SECONDS (default 470) is the whole budget; the target gets what the other stages leave (at most 180 s).
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?OUT must name the output folder}"
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1

RUN_SECONDS=${RUN_SECONDS:-470}
CORPUS=${CORPUS:-.carry/train}
WORK="$(mktemp -d)"
DATA="$WORK/data"
STAGE="$WORK/out"
mkdir -p "$DATA" "$STAGE/tests/fixtures/default_target" "$STAGE/tools/train/results"

echo "date: $(date -u)  host: $(hostname)  cpus: $(nproc)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 -c 'import sys, torch, tokenizers, tiktoken, safetensors, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "tokenizers", tokenizers.__version__, "tiktoken", tiktoken.__version__, "safetensors", safetensors.__version__)'
ls -la "$CORPUS"

echo "=== tokenizer"
python3 tools/train/tok_train.py "$CORPUS" "$DATA"
cp "$DATA/tokenizer_cases.json" "$STAGE/tests/fixtures/default_target/"
cp "$DATA/tokenizer_stats.json" "$STAGE/tools/train/results/"
cp "$CORPUS/corpus_stats.json" "$STAGE/tools/train/results/" 2>/dev/null || true

# Reserve for the checks, the draft and the evaluation; the target gets the rest (at most 180 s).
left=$((RUN_SECONDS - SECONDS))
draft_s=${DRAFT_SECONDS:-50}
target_s=$((left - draft_s - 170))
[ "$target_s" -gt 180 ] && target_s=180
[ "$target_s" -lt 30 ] && target_s=30
echo "=== pipeline: $SECONDS s used, target ${target_s} s, draft ${draft_s} s"

set +e
python3 tools/train/pipeline.py --data "$DATA" --out "$STAGE" --target-seconds "$target_s" --draft-seconds "$draft_s"
rc=$?
set -e
echo "=== pipeline exit $rc after $SECONDS s"

rm -rf "$STAGE/tmp"
cp "$STAGE/tools/train/results/summary.json" "$OUT/summary.json" 2>/dev/null || true
tar cf - -C "$STAGE" . | split -b 15m -a 2 - "$OUT/artifacts.tar.part-"
ls -la "$OUT"
tar tvf <(cat "$OUT"/artifacts.tar.part-*) | head -40
rm -rf "$WORK"
exit $rc
