#!/usr/bin/env bash
# End-to-end crash consistency (issue 20, scope 4): every command that writes an install is killed
# with SIGKILL at chosen points, and the next run must either work exactly (the source model's
# greedy ids) or refuse in one line; running the command again must finish the job.
#
# A kill point is a system call: strace runs the command once and lists the calls that can change
# a file (open, write, truncate, sync, rename, unlink, mkdir, close, io_uring), then runs it again
# with `--inject=<call>:signal=KILL:when=<n>` for some of them, so the process dies on entering its
# n-th call of that kind, before the kernel acts on it. Every rename and unlink is a point; the
# others are spread over the whole list (the first and the last always among them) and jittered by
# a seed that is printed; rerun with
# SLUICE_CRASH_SEED=<seed> to repeat them, SLUICE_CRASH_POINTS=<k> for more per command
# (SLUICE_CRASH_ALL_COMMITS=0 samples the renames and unlinks too: the sanitizer run's budget).
#
# Commands: prepare (first, again with its homes swapped, and --rebalance so), setup --full, setup --stream, its
# first run (experts fetched mid-generation; records whole, and striped over two homes) and warm --fetch,
# upgrade (v1 -> v3 manifest),
# verify --repair, and the heat file a run writes on exit.
set -euo pipefail
sluice="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "crash_kill: FAIL: $*" >&2; exit 1; }
command -v strace >/dev/null || fail "strace not found (scripts/install-deps.sh installs it)"
strace -qq -o /dev/null true 2>/dev/null || fail "strace cannot trace here (ptrace refused)"

seed=${SLUICE_CRASH_SEED:-$((RANDOM * 32768 + RANDOM))}
points=${SLUICE_CRASH_POINTS:-16}
all_commits=${SLUICE_CRASH_ALL_COMMITS:-1}  # 0: renames and unlinks are sampled like the rest (sanitizer builds)
echo "crash_kill: seed $seed, $points kill points per command (SLUICE_CRASH_SEED / SLUICE_CRASH_POINTS)"
RANDOM=$((seed % 32768))
calls=openat,creat,write,pwrite64,pwritev,pwritev2,writev,ftruncate,fallocate,fsync,fdatasync
calls+=,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,close,io_uring_enter,copy_file_range

ids_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])'; }
gen() { "$sluice" run --model "$1" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json "${@:2}" 2>"$work/gen.err" | ids_of; }

"$sluice" make-tiny --out "$work/src" --experts 16 --seed 9 >/dev/null 2>&1
want="$("$sluice" run --model "$work/src" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json --experts resident | ids_of)"

# After a kill: a run gives the source model's ids or fails with exit 1 and one line on stderr.
probe_run() {
  local what=$1 model=$2 rc=0 got
  got="$("$sluice" run --model "$model" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json \
           2>"$work/probe.err" | ids_of 2>/dev/null)" || rc=$?
  if [ "$rc" -eq 0 ] && [ "$got" = "$want" ]; then return 0; fi
  rc=0
  "$sluice" run --model "$model" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json \
    >/dev/null 2>"$work/probe.err" || rc=$?
  [ "$rc" -eq 1 ] || fail "$what: a run after the kill exited $rc (want 0 with $want, or 1): $(head -c 600 "$work/probe.err")"
  [ "$(wc -l <"$work/probe.err")" -eq 1 ] || fail "$what: a run after the kill did not refuse in one line: $(head -c 600 "$work/probe.err")"
}

# Lists "<call> <n>" for the traced calls of one uninterrupted run that can change a file under the
# scratch directory (strace -y names each descriptor's file): opens for writing, writes, syncs,
# truncations, renames, unlinks, mkdirs, and the closes of descriptors opened for writing; reads,
# library loads and the terminal are left out. n counts that call's invocations of every kind in
# its process, as --inject's when= does.
kill_points() {
  local log=$work/trace.log
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -y -e trace="$calls" -o "$log" "$@" >/dev/null 2>&1 || true
  awk -v dir="$work/" '
    { if ($2 ~ /^</) next; name = $2; sub(/\(.*/, "", name); if (name == "") next
      n = ++seen[$1 " " name]
      if (index($0, dir) == 0) next
      if (name == "openat" || name == "creat") {
        if ($0 !~ /O_WRONLY|O_RDWR|O_CREAT/ && name == "openat") next
        if (match($0, /= [0-9]+</)) wfd[$1 " " substr($0, RSTART + 2, RLENGTH - 3)] = 1
      } else if (name == "close") {
        fd = $2; sub(/^close\(/, "", fd); sub(/<.*/, "", fd)
        if (!((($1 " " fd) in wfd))) next
        delete wfd[$1 " " fd]
      }
      print name, n }' "$log"
}

# Picks every rename and unlink (the points where a step commits, where a kill finds the most
# half-done states) and $points of the rest: the first, the last, and others spread evenly with
# jitter.
pick() {
  local -a all rest
  mapfile -t all
  [ "${#all[@]}" -gt 0 ] || fail "no kill points traced"
  local p
  for p in "${all[@]}"; do
    case $p in
      rename* | unlink*) if [ "$all_commits" = 1 ]; then printf '%s\n' "$p"; else rest+=("$p"); fi ;;
      *) rest+=("$p") ;;
    esac
  done
  local total=${#rest[@]} k
  [ "$total" -gt 0 ] || return 0
  if [ "$total" -le "$points" ]; then printf '%s\n' "${rest[@]}"; return; fi
  printf '%s\n' "${rest[0]}"
  for ((k = 1; k < points - 1; ++k)); do
    local lo=$(((total - 1) * k / (points - 1))) hi=$(((total - 1) * (k + 1) / (points - 1)))
    printf '%s\n' "${rest[lo + RANDOM % (hi - lo > 0 ? hi - lo : 1)]}"
  done
  printf '%s\n' "${rest[total - 1]}"
}

killed=0
# crash <name> <prepare-fn> <check-fn> -- <command...>: for each kill point, <prepare-fn> builds the
# state before the command, the command is killed at the point, <check-fn> <name> checks what the
# kill left, and the command is run again and must succeed; then <check-fn> runs once more.
crash() {
  local name=$1 before=$2 check=$3
  shift 4
  "$before"
  local list here=0 ran=0 total
  list="$(kill_points "$@")"
  total=$(wc -l <<<"$list")
  list="$(pick <<<"$list")"
  while read -r call n; do
    "$before"
    local rc=0
    # (The subshell keeps bash's "Killed" job message out of the log.)
    # (LeakSanitizer cannot run under ptrace: a sanitizer build's traced runs skip the leak check.)
    (ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -o /dev/null --inject="$call":signal=KILL:when="$n" \
       "$@" >/dev/null 2>"$work/op.err"
     exit $?) 2>/dev/null || rc=$?
    if [ "$rc" -eq 137 ]; then here=$((here + 1)); else ran=$((ran + 1)); fi
    "$check" "$name killed at $call #$n (rc $rc)"
    "$@" >/dev/null 2>"$work/op.err" || fail "$name killed at $call #$n: running it again failed: $(head -c 600 "$work/op.err")"
    "$check" "$name killed at $call #$n, then run again" final
  done <<<"$list"
  # A point past the calls a run makes (the counts differ a little from run to run) lets it finish.
  [ "$here" -gt 0 ] || fail "$name: no kill point was reached"
  echo "crash_kill: $name: $here killed, $ran ran to the end, of $total points traced"
  killed=$((killed + here))
}

# --- prepare, first time: the model directory from make-tiny, one home.
pre_prepare() { rm -rf "$work/m" "$work/h1" "$work/h2"; cp -a "$work/src" "$work/m"; }
check_run() {
  if [ "${2:-}" = final ]; then
    local got
    got="$(gen "$work/m")" || fail "$1: run failed: $(head -c 600 "$work/gen.err")"
    [ "$got" = "$want" ] || fail "$1: generated $got, want $want"
  else
    probe_run "$1" "$work/m"
  fi
}
crash prepare pre_prepare check_run -- "$sluice" prepare --model "$work/m" --home "$work/h1" --no-measure

# --- prepare again over a prepared model, its two homes swapped: every layer file keeps its size
# but must now hold the other half of the experts.
pre_reprepare() {
  pre_prepare
  "$sluice" prepare --model "$work/m" --home "$work/h1" --home "$work/h2" --no-measure >/dev/null 2>&1
}
crash re-prepare pre_reprepare check_run -- "$sluice" prepare --model "$work/m" --home "$work/h2" --home "$work/h1" --no-measure

# --- rebalance (records from the homes, not the checkpoint) onto the swapped homes: every layer
# file changes; the old ones must stay whole until the new manifest is written.
crash rebalance pre_reprepare check_run -- "$sluice" prepare --model "$work/m" --home "$work/h2" --home "$work/h1" --no-measure --rebalance

# --- heat: a streamed run writes sluice-heat.json as it exits; a kill must leave the old file or
# the new one, whole.
check_heat() {
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/m/sluice-heat.json" 2>/dev/null \
    || fail "$1: sluice-heat.json is not whole JSON: $(head -c 300 "$work/m/sluice-heat.json")"
  check_run "$@"
}
pre_heat() { [ -f "$work/m/sluice-heat.json" ] || { pre_reprepare; gen "$work/m" >/dev/null; }; }
crash heat pre_heat check_heat -- "$sluice" run --model "$work/m" --prompt-ids 7,8,9 --max-new 12 --ignore-eos

# --- setup --full from a local directory.
pre_full() { rm -rf "$work/m" "$work/h1"; }
check_full() {
  check_run "$@"
  if [ "${2:-}" = final ]; then
    "$sluice" verify --model "$work/m" >/dev/null 2>"$work/verify.err" || fail "$1: verify: $(head -c 600 "$work/verify.err")"
  fi
}
crash "setup --full" pre_full check_full -- "$sluice" setup --source "$work/src" --model "$work/m" --full \
  --home "$work/h1" --no-measure --quiet

# --- a --stream install's first run fetches the experts it routes to, then warm --fetch more.
pre_stream() {
  rm -rf "$work/m" "$work/h1"
  "$sluice" setup --source "$work/src" --model "$work/m" --stream --home "$work/h1" --quiet >/dev/null 2>&1
}
check_stream() {
  check_run "$@"
  if [ "${2:-}" = final ]; then
    "$sluice" verify --model "$work/m" >/dev/null 2>"$work/verify.err" || fail "$1: verify: $(head -c 600 "$work/verify.err")"
  fi
}
crash "setup --stream" pre_full check_stream -- "$sluice" setup --source "$work/src" --model "$work/m" --stream \
  --home "$work/h1" --quiet
crash "stream fetch (run)" pre_stream check_stream -- "$sluice" run --model "$work/m" --prompt-ids 4,5,6 \
  --max-new 10 --ignore-eos --json
gen "$work/src" --router-trace "$work/route.jsonl" --experts resident >/dev/null
crash "stream fetch (warm)" pre_stream check_stream -- "$sluice" warm --model "$work/m" --trace "$work/route.jsonl" --fetch 12

# --- the same with every record striped over two homes (a model whose records span four pages):
# a fetched record's journal line holds one checksum per part.
"$sluice" make-tiny --out "$work/src2" --experts 16 --moe-inter 256 --seed 9 >/dev/null 2>&1
want_whole=$want
want="$("$sluice" run --model "$work/src2" --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json --experts resident | ids_of)"
pre_striped_stream() {
  rm -rf "$work/m" "$work/h1" "$work/h2"
  "$sluice" setup --source "$work/src2" --model "$work/m" --stream --home "$work/h1" --home "$work/h2" --stripe on \
    --quiet >/dev/null 2>&1
}
crash "striped stream fetch (run)" pre_striped_stream check_stream -- "$sluice" run --model "$work/m" \
  --prompt-ids 4,5,6 --max-new 10 --ignore-eos --json
want=$want_whole

# --- upgrade of a version-1 manifest.
"$sluice" setup --source "$work/src" --model "$work/full" --full --home "$work/full-home" --no-measure --quiet
python3 - "$work/full/sluice-manifest.json" <<'EOF'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
assert j["version"] == 3, j["version"]
j["version"] = 1
def strip(x):
    if isinstance(x, dict):
        x.pop("local", None)
        for v in x.values(): strip(v)
    elif isinstance(x, list):
        for v in x: strip(v)
strip(j)
open(p, "w").write(json.dumps(j, indent=1) + "\n")
EOF
pre_upgrade() { rm -rf "$work/m"; cp -a "$work/full" "$work/m"; }
check_upgrade() {
  check_run "$@"
  if [ "${2:-}" = final ]; then
    python3 -c 'import json,sys; v = json.load(open(sys.argv[1]))["version"]; sys.exit(v != 3)' \
      "$work/m/sluice-manifest.json" || fail "$1: the manifest is not at version 3"
  fi
}
crash upgrade pre_upgrade check_upgrade -- "$sluice" upgrade --model "$work/m"

# --- verify --repair of a damaged shard.
"$sluice" upgrade --model "$work/full" >/dev/null
shard=model-00002-of-00002.safetensors
pre_repair() {
  rm -rf "$work/m"
  cp -a "$work/full" "$work/m"
  printf 'x' | dd of="$work/m/$shard" bs=1 seek=100 conv=notrunc 2>/dev/null
}
check_repair() {
  if [ "${2:-}" = final ]; then
    cmp -s "$work/m/$shard" "$work/src/$shard" || fail "$1: the shard was not restored"
    check_full "$@"
    return
  fi
  local rc=0
  "$sluice" verify --model "$work/m" >/dev/null 2>"$work/verify.err" || rc=$?
  [ "$rc" -le 1 ] || fail "$1: verify after the kill exited $rc: $(head -c 600 "$work/verify.err")"
}
crash "verify --repair" pre_repair check_repair -- "$sluice" verify --model "$work/m" --repair

echo "crash_kill: ok ($killed kills, seed $seed)"
