#!/usr/bin/env bash
# The one command run on the GPU machine (device tool) to train the default DSpark drafter against
# the committed default target: train_dspark.py reads the corpus carried in .carry/train (made by
# make_corpus.sh), trains, exports and measures the export through tools/reference/dspark_ref.py.
# Returns under $OUT: log.txt and dspark.tgz (`tar xzf dspark.tgz` in the repository root restores
# models/default/dspark/{config.json,model.safetensors}, tools/train/results/dspark_summary.json and
# tools/train/results/dspark_device_log.txt). Exit status: train_dspark.py's (non-zero on failure).
# Time: DSPARK_SECONDS (default 150) of training, DSPARK_PREP_SECONDS (default 60) at most for the
# target's rows of the training set; the whole run is about 4-5 minutes on one H200.
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?OUT must name the output folder}"
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1

CORPUS=${CORPUS:-.carry/train}
WORK="$(mktemp -d)"
STAGE="$WORK/out"
mkdir -p "$STAGE/tools/train/results"

echo "date: $(date -u)  host: $(hostname)  cpus: $(nproc)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 -c 'import sys, torch, tiktoken, safetensors, numpy; print("python", sys.version.split()[0], *(m.__name__ + " " + getattr(m, "__version__", "?") for m in (torch, tiktoken, safetensors, numpy)))'
ls -la "$CORPUS" models/default/target

set +e
python3 tools/train/train_dspark.py "$CORPUS" "$STAGE" --target models/default/target \
  --seconds "${DSPARK_SECONDS:-150}" --prep-seconds "${DSPARK_PREP_SECONDS:-60}" ${DSPARK_ARGS:-}
rc=$?
set -e
echo "=== train_dspark exit $rc after $SECONDS s"

cp "$OUT/log.txt" "$STAGE/tools/train/results/dspark_device_log.txt" || true
tar czf "$OUT/dspark.tgz" -C "$STAGE" .
ls -la "$OUT"
tar tzvf "$OUT/dspark.tgz"
rm -rf "$WORK"
exit $rc
