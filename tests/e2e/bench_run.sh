#!/usr/bin/env bash
# `sluice bench run` end to end on a tiny streamed model: 2 arms x 2 reps plus raw-read floors give
# every report file, consistent counts and ratios; a wrong --expect-ids invalidates every run; a
# peer arm's agreement, memory cgroups and cold starts;
# `sluice bench drives` writes per-home results and updates the manifest's bandwidths.
# Usage: bench_run.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$sluice" make-tiny --arch kimi_k3 --out "$work/m" --shards 1 --seed 5 2>/dev/null
"$sluice" prepare --model "$work/m" --home "$work/h1" --home "$work/h2" >/dev/null 2>&1

out="$work/out"
"$sluice" bench run --model "$work/m" --prompt-ids 1,2,3,4,5 --max-new 6 --reps 2 --quiet \
  --arm "stream:--cache-gb 0.001" --arm "noprefetch:--cache-gb 0.001 --no-prefetch" --arm "resident:--experts resident" \
  --floor --floor-seconds 0.2 --compute-arm resident --out "$out" > "$work/table.md"
for f in results.json runs.csv summary.csv results.md steady-by-arm.svg bandwidth-stream.svg bandwidth-noprefetch.svg; do
  [ -s "$out/$f" ] || fail "missing $f"
done
head -c 4 "$out/steady-by-arm.svg" | grep -q '<svg' || fail "steady-by-arm.svg is not SVG"
grep -q '| stream |' "$work/table.md" || fail "table lacks the stream arm"
grep -q 'Per-home engine read bandwidth' "$out/results.md" || fail "results.md lacks per-home bandwidth"
[ -s "$out/relative.svg" ] || fail "missing relative.svg (floors were measured)"
[ "$(wc -l < "$out/runs.csv")" -eq 7 ] || fail "runs.csv should have a header and 6 runs"
[ "$(wc -l < "$out/summary.csv")" -eq 4 ] || fail "summary.csv should have a header and 3 groups"
[ "$(ls "$out"/runs/*.events.jsonl | wc -l)" -eq 6 ] || fail "want 6 event logs"
[ "$(ls "$out"/runs/*.trace.jsonl | wc -l)" -eq 6 ] || fail "want 6 router traces (--floor)"

python3 - "$out/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
runs, groups, floors = r["runs"], r["groups"], r["floors"]
assert len(runs) == 6 and len(groups) == 3 and len(floors) == 2, (len(runs), len(groups), len(floors))
order = [x["group"] for x in sorted(runs + [dict(group="floor", seq=f["seq"]) for f in floors], key=lambda x: x["seq"])]
assert order == ["stream", "noprefetch", "resident", "floor", "floor", "resident", "noprefetch", "stream"], order
assert all(x["valid"] for x in runs), [x["invalid_reason"] for x in runs]
outs = {tuple(x["output"]) for x in runs}
assert len(outs) == 1 and len(next(iter(outs))) == 6, outs
for x in runs:
    assert abs(x["steady_tps"] - 5 / x["decode_s"]) < 1e-6 * x["steady_tps"]
    assert abs(x["inclusive_tps"] - 6 / x["wall_s"]) < 1e-6 * x["inclusive_tps"]
    assert x["wall_s"] > x["ttft_s"] + x["decode_s"] - 1e-9
for g in groups:
    mine = sorted(x["steady_tps"] for x in runs if x["group"] == g["name"])
    assert g["valid"] == 2 and abs(g["steady_tps"]["median"] - sum(mine) / 2) < 1e-9, g["name"]
    assert g["steady_tps"]["min"] == mine[0] and g["steady_tps"]["max"] == mine[1]
first = groups[0]["steady_tps"]["median"]
for g in groups:
    assert abs(g["steady_ratio"] - g["steady_tps"]["median"] / first) < 1e-9
stream = groups[0]
assert stream["bytes_per_token"]["median"] > 0 and stream["hit_rate"]["median"] is not None
assert stream["derived"]["read_bw_over_raw"] > 0 and stream["derived"]["decode_over_max_floor"] > 0
assert groups[2]["bytes_per_token"]["median"] == 0  # resident experts read nothing
# Cache floors from each streamed run's router trace: MIN <= what the run read, MIN <= LRU.
for g in groups[:2]:
    d = g["derived"]
    mn, lru, over = d["min_bytes_per_token"]["median"], d["lru_bytes_per_token"]["median"], d["read_over_min"]["median"]
    assert mn is not None and lru is not None and 0 <= mn <= lru, (g["name"], mn, lru)
    # decode MIN starts from the best cache content: 0 when the decode's experts fit (no ratio then)
    assert (over is None) == (mn == 0) and (over is None or over >= 1 - 1e-9), (g["name"], mn, over)
    run_over = d["run_read_over_min"]["median"]
    assert d["run_min_bytes"]["median"] > 0 and run_over is not None and run_over >= 1 - 1e-9, (g["name"], run_over)
    assert abs(d["io_floor_min_s_per_token"] - mn / d["raw_read_bytes_per_s"]["median"]) < 1e-9 * max(1.0, mn)
    assert d["prefill_min_bytes"]["median"] > 0
assert all(f["bytes_per_s"] > 0 for f in floors)
PY

# bench/cache_bounds.py replays a run's router trace: its MIN and best fixed content are the
# harness's for that run (same slots, same slot bytes), and no cache reads less than MIN. The
# cache holds 24 of the 128 experts, so the decode must read.
"$sluice" bench run --model "$work/m" --prompt-ids 1,2,3,4,5 --max-new 6 --reps 1 --quiet \
  --arm "small:--cache-gb 0.0001" --floor --floor-seconds 0.2 --out "$work/small" > /dev/null
python3 - "$work/small" "$work/m/sluice-manifest.json" "$src/bench/cache_bounds.py" <<'PY'
import glob, json, subprocess, sys
out, manifest, script = sys.argv[1:4]
slot = json.load(open(manifest))["slot_bytes"]
d = json.load(open(out + "/results.json"))["groups"][0]["derived"]
trace = glob.glob(out + "/runs/*-small.trace.jsonl")[0]
ends = [json.loads(l) for l in open(trace.replace(".trace.", ".events.")) if '"run_end"' in l]
slots = ends[-1]["stats"]["store"]["cache_slots"]
b = json.loads(subprocess.run([sys.executable, script, "--json", "--slots", str(slots), "--horizons", "1,2,1000", trace],
                              check=True, capture_output=True, text=True).stdout)
rpt = b["reads_per_token"]
assert b["tokens"] == 5 and rpt["MIN"] > 0, b
assert abs(rpt["MIN"] * slot - d["min_bytes_per_token"]["median"]) <= 1e-6 * slot, (rpt, d["min_bytes_per_token"])
assert abs(rpt["static"] * slot - d["static_bytes_per_token"]["median"]) <= 1e-6 * slot, (rpt, d["static_bytes_per_token"])
assert set(rpt) == {"MIN", "static", "LRU", "LFU", "LFU+next 1", "LFU+next 2", "LFU+next 1000"}, rpt
assert all(v >= rpt["MIN"] for v in rpt.values()), rpt
PY

# Prefill-only runs give the read-once ratio (bytes read / union of routed experts).
"$sluice" bench run --model "$work/m" --prompt-ids 1,2,3,4,5,6,7,8 --max-new 1 --reps 1 --quiet \
  --arm "pre:--cache-gb 0.01" --out "$work/pre" > /dev/null
python3 - "$work/pre/results.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["groups"][0]
ratio = g["derived"]["prefill_read_over_union"]["median"]
assert ratio is not None and 0.99 <= ratio <= 1.5, ratio
PY
[ -s "$work/pre/prefill-bytes.svg" ] || fail "missing prefill-bytes.svg"

# A text of record that the model does not produce invalidates every run; the command fails.
rc=0
"$sluice" bench run --model "$work/m" --prompt-ids 1,2,3 --max-new 3 --reps 1 --quiet --arm a: --arm b: \
  --expect-ids 0,0,0 --out "$work/bad" > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "an all-invalid bench should exit 1 (got $rc)"
grep -q "differs from the expectation" "$work/bad/results.md" || fail "results.md should list the invalid runs"

# A peer arm: another engine through a command that writes the events log `sluice run --events`
# writes. This fake peer runs sluice and changes its fourth token, so its runs stay valid (a peer is
# compared, not checked) and the report gives the agreement: 3 tokens the same before the
# difference, 5 of 6 positions. A memory cgroup (root, cgroup v1) and a cold start apply to every
# run; a peer that needs more memory than its limit is killed there and its runs are invalid.
cat > "$work/peer.py" <<'PY'
import json, subprocess, sys
a = sys.argv[1:]
opt = {a[i]: a[i + 1] for i in range(0, len(a) - 1, 2)}
if "--hog" in opt:
    hog = bytearray(int(opt["--hog"]) << 20)  # touched: zero-filled pages count once written
    for i in range(0, len(hog), 4096): hog[i] = 1
raw = opt["--events"] + ".sluice"
subprocess.run([opt["--sluice"], "run", "--model", opt["--model"], "--prompt-ids", opt["--prompt-ids"],
                "--max-new", opt["--max-new"], "--events", raw, "--experts", "resident"], check=True,
               stdout=subprocess.DEVNULL)
seen = 0
with open(opt["--events"], "w") as out:
    for line in open(raw):
        e = json.loads(line)
        for key in ("emitted", "completion_ids"):
            if key in e and e["event"] != "run_end":
                for k in range(len(e[key])):
                    seen += 1
                    if seen == 4: e[key][k] += 1
        if e["event"] == "run_end":
            e["completion_ids"][3] += 1
        out.write(json.dumps(e) + "\n")
PY
limit=()
if [ "$(id -u)" = 0 ] && [ -w /sys/fs/cgroup/memory ]; then limit=(--memory-limit 768M); else echo "note: not root: no memory cgroup checks"; fi
"$sluice" bench run --model "$work/m" --prompt-ids 1,2,3,4,5 --max-new 6 --reps 2 --quiet --cold "${limit[@]}" \
  --arm "self:--cache-gb 0.001" --arm "peer:--peer 'python3 $work/peer.py' --model $work/m --sluice $sluice" \
  --out "$work/peer" > /dev/null
python3 - "$work/peer/results.json" "${#limit[@]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
limited = sys.argv[2] != "0"
runs = r["runs"]
assert all(x["valid"] for x in runs), [x["invalid_reason"] for x in runs]
peer = [x for x in runs if x.get("peer")]
assert len(peer) == 2 and all(x["agree_prefix"] == 3 and abs(x["agree_share"] - 5 / 6) < 1e-9 for x in peer), peer
assert all(x["max_rss_bytes"] > 1 << 20 and x["storage_read_bytes"] >= 0 for x in runs), runs
g = {x["name"]: x for x in r["groups"]}
assert g["peer"]["derived"]["agree_prefix"]["median"] == 3
if limited:
    assert all(x["memory_limit_bytes"] == 768_000_000 and 0 < x["cgroup_peak_bytes"] <= 768_000_000 for x in runs), runs
PY
grep -q 'peer: same prefix' "$work/peer/results.md" || fail "results.md lacks the agreement columns"
if [ "${#limit[@]}" -gt 0 ]; then
  rc=0
  "$sluice" bench run --model "$work/m" --prompt-ids 1,2,3 --max-new 3 --reps 1 --quiet --memory-limit 32M \
    --arm "hog:--peer 'python3 $work/peer.py' --model $work/m --sluice $sluice --hog 256" --out "$work/hog" \
    > /dev/null 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || fail "a peer over its memory limit should leave no valid run (exit $rc)"
  grep -q "memory limit of 30 MiB" "$work/hog/results.md" || fail "results.md should say the run hit its limit: $(grep -A3 Invalid "$work/hog/results.md")"
  ls /sys/fs/cgroup/memory | grep -q '^sluice-bench-' && fail "a bench cgroup was left behind"
fi
rc=0
"$sluice" bench run --model "$work/m" --prompt-ids 1 --arm "p:--peer 'python3 x'" --out "$work/nopeer" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "needs its own --model" "$work/err" || fail "a peer arm without a model: $(cat "$work/err")"

# Drive ceilings: per-home files and the manifest's read_bytes_per_s.
"$sluice" bench drives --home "$work/h1" --home "$work/h2" --model "$work/m" --depths 1,4 --seconds 0.1 \
  --out "$work/drives" > "$work/drives.json" 2>/dev/null
for h in h1 h2; do [ -s "$work/$h/sluice-drive.json" ] || fail "missing $h/sluice-drive.json"; done
[ -s "$work/drives/drives.svg" ] || fail "missing drives.svg"
python3 - "$work/m/sluice-manifest.json" "$work/h1/sluice-drive.json" <<'PY'
import json, sys
m, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["queue_depth_stored"] == 4 and len(d["by_queue_depth"]) == 2
assert abs(m["homes"][0]["read_bytes_per_s"] - d["read_bytes_per_s"]) <= 1e-6 * d["read_bytes_per_s"]
PY
"$sluice" run --model "$work/m" --prompt-ids 1,2 --max-new 2 --json > /dev/null || fail "the updated manifest does not load"
echo "ok   bench run, bench drives"
