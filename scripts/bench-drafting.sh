#!/usr/bin/env bash
# Drafting benchmark (issue 5): tokens/s and acceptance per drafter against drafting off, in the
# same `sluice bench run` rotation (cold processes, A B B A, every run's tokens checked against
# the first run's - so it is also a greedy-equality check), on a draft-friendly and a
# draft-hostile prompt, with the default target's routed experts streamed from a home through a
# small cache (a quarter of the expert bank). Then the union of routed experts and the expert
# bytes read per step, for verify steps against single-token steps, from the runs' event logs.
#
#   scripts/bench-drafting.sh SLUICE WORKDIR [ARM...]
#
# ARM is one of off ngram model qwen3 dspark (default: every one this sluice and the tree support;
# off is always first). DSPARK=DIR names a DSpark checkpoint for the dspark arm. DRIVE_MBPS=N puts
# the home on a loop drive throttled to N MB/s (scripts/loop-drives.sh; needs root) so that
# decode is read-bound as it is for the real model; without it the home is a folder on the
# virtual disk, whose host cache makes reads cheap. REPS (default 3) and MAX_NEW (default 128).
set -euo pipefail
sluice=$(realpath "$1")
work=$(realpath -m "$2")
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${REPS:-3}
max_new=${MAX_NEW:-128}
mkdir -p "$work/results"

# The target: a copy of models/default/target (prepare writes its manifest into the model dir).
model="$work/target"
mkdir -p "$model"
for f in "$root"/models/default/target/*; do cmp -s "$f" "$model/$(basename "$f")" || cp "$f" "$model/"; done
run_in=()
if [ -n "${DRIVE_MBPS:-}" ]; then
  drives="$work/drives"
  [ -e "$drives/loop-drives.state" ] || bash "$root/scripts/loop-drives.sh" up "$drives" 1 "$DRIVE_MBPS"
  home="$drives/d1/home"
  run_in=(bash "$root/scripts/loop-drives.sh" exec "$drives")
else
  home="$work/home"
fi
if [ ! -f "$model/sluice-manifest.json" ]; then
  "$sluice" prepare --model "$model" --home "$home" > /dev/null
fi
bank=$(du -sb "$home" | cut -f1)
cache=$(awk -v b="$bank" 'BEGIN { printf "%.6f", b / 4 / 1e9 }')
echo "bench-drafting: expert bank $((bank / 1000)) kB on $home, cache $cache GB; ${DRIVE_MBPS:-unthrottled} MB/s"

# Arms: name -> sluice run flags.
declare -A flags=(
  [off]="--draft off"
  [ngram]="--draft ngram"
  [model]="--draft model:$root/models/default/draft"
  [qwen3]="--draft model:$root/models/default/draft-qwen3"
)
[ -n "${DSPARK:-}" ] && flags[dspark]="--draft dspark:$DSPARK"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  wanted=(off ngram model)
  [ -d "$root/models/default/draft-qwen3" ] && wanted+=(qwen3)
  [ -n "${DSPARK:-}" ] && wanted+=(dspark)
fi
arms=(--arm "off:--cache-gb $cache ${flags[off]}")
for a in "${wanted[@]}"; do
  [ "$a" = off ] && continue
  [ -n "${flags[$a]:-}" ] || { echo "bench-drafting: unknown arm $a (or DSPARK unset)" >&2; exit 2; }
  arms+=(--arm "$a:--cache-gb $cache ${flags[$a]}")
done

# Draft-friendly: Bible text the pair was trained on, whose greedy continuation repeats itself
# (the phrase pattern of the prompt comes back), which drafters predict well. Draft-hostile: text unlike the corpus
# (hex, mixed scripts, shuffled words), where drafters should be turned off quickly.
friendly="And the LORD said unto Moses, Behold, I will go up to the land of Israel, and will bring them into the hand of the Chaldeans, and will bring them to the land of the Philistines, and to"
hostile="0x7f3a 9qz Kx7 ##@@ 4f2e-9b1c zebra? quantum/FLUX_8 Œuvre naïve 東京 7e-05 <> ~~ WQx plinth 33.1% ∑ jn9 ·· vorpal#2 ruby:sky ~ 0b1101"

for kind in friendly hostile; do
  prompt=${!kind}
  out="$work/results/$kind"
  rm -rf "$out"
  "${run_in[@]}" "$sluice" bench run --model "$model" --prompt "$prompt" --max-new "$max_new" --reps "$reps" \
    "${arms[@]}" --out "$out" | tee "$work/results/$kind.txt"
done

# Union and bytes per step: verify steps (drafts proposed) vs single-token steps, per arm.
python3 - "$work/results" <<'EOF'
import glob, json, os, sys, collections
base = sys.argv[1]
print("\n| prompt | arm | single-token steps | union experts | expert kB read | verify steps | rows | union experts | expert kB read |")
print("|---|---|---|---|---|---|---|---|---|")
for kind in ("friendly", "hostile"):
    acc = collections.defaultdict(lambda: [[0, 0, 0, 0], [0, 0, 0, 0]])
    for f in sorted(glob.glob(os.path.join(base, kind, "runs", "*.events.jsonl"))):
        arm = os.path.basename(f).split("-", 1)[1].rsplit(".events", 1)[0].split("@")[0]
        for line in open(f):
            e = json.loads(line)
            if e.get("event") != "decode_step" or "union_experts" not in e:
                continue
            k = 1 if e.get("proposed", 0) > 0 else 0
            a = acc[arm][k]
            a[0] += 1; a[1] += 1 + e.get("proposed", 0); a[2] += e["union_experts"]; a[3] += e.get("expert_bytes_read", 0)
    for arm, (s, v) in acc.items():
        def cell(a, rows):
            if a[0] == 0:
                return "0 | - | -" if not rows else "0 | - | - | -"
            r = f"{a[0]} | " + (f"{a[1] / a[0]:.2f} | " if rows else "")
            return r + f"{a[2] / a[0]:.1f} | {a[3] / a[0] / 1e3:.0f}"
        print(f"| {kind} | {arm} | {cell(s, False)} | {cell(v, True)} |")
EOF
