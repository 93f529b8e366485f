#!/usr/bin/env bash
# Builds one libFuzzer target and runs it briefly; CTest calls it as
#   bash run_fuzz.sh <target-name> <source-dir> <build-dir-for-fuzz>
# The target's .cpp names the project sources it needs on `// fuzz-sources: a.cpp b.cpp` lines
# (paths relative to the source dir) and extra link flags on `// fuzz-libs: -lfoo` lines.
# Seeds come from tests/fuzz/corpus/<target>/, a dictionary from tests/fuzz/<target>.dict; both
# optional. Runs SLUICE_FUZZ_SECONDS (default 10), or SLUICE_FUZZ_RUNS executions when that is set
# (make fuzz), and prints the executions and executions/s. Exit 77 = skipped (no clang++); non-zero = crash.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 <target-name> <source-dir> <build-dir-for-fuzz>" >&2
  exit 2
fi
target=$1
src=$(cd "$2" && pwd)
work=$3/$target
if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIP: clang++ not found"
  exit 77
fi

main_cpp=$src/tests/fuzz/$target.cpp
[ -f "$main_cpp" ] || { echo "run_fuzz: no fuzz target $main_cpp" >&2; exit 2; }
read -r -a sources <<<"$(sed -n 's|^// fuzz-sources:||p' "$main_cpp" | tr '\n' ' ')"
read -r -a libs <<<"$(sed -n 's|^// fuzz-libs:||p' "$main_cpp" | tr '\n' ' ')"
seconds=${SLUICE_FUZZ_SECONDS:-10}
runs=${SLUICE_FUZZ_RUNS:-}
# Objects are shared by every target (one set of flags compiles them all), so a source that several
# targets name (json_util, the tokenizer) is compiled once. Each is written under a temporary name
# and renamed, so two targets compiling the same source at once (ctest -j) cannot mix their bytes.
objdir=$3/obj
mkdir -p "$objdir" "$work/corpus"

# Line tables only (-gline-tables-only): a crash's stack still names files and lines, and the
# objects compile faster than with full debug information.
cxx=(clang++ -std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
     -fno-omit-frame-pointer -I"$src/src")
# Objects compile through ccache where it is installed, as the CMake builds do (SLUICE_CCACHE=OFF
# turns it off): a CI machine that kept its cache compiles only what changed.
launcher=()
if [ "${SLUICE_CCACHE:-ON}" != OFF ] && command -v ccache >/dev/null 2>&1; then launcher=(ccache); fi
# The flags stamp is checked, the objects cleared and the stamp written under one lock, before any
# compiling: a target that found no stamp used to clear the objects that another target (ctest -j)
# had just compiled, and that target's link then failed on a missing object.
flags_stamp="$objdir/flags"
flags_now="${cxx[*]}"
(
  flock 9
  if ! { [ -f "$flags_stamp" ] && [ "$(cat "$flags_stamp")" = "$flags_now" ]; }; then
    rm -f "$objdir"/*.o "$objdir"/*.o.d
    echo "$flags_now" >"$flags_stamp.$$"
    mv -f "$flags_stamp.$$" "$flags_stamp"
  fi
) 9>"$objdir/lock"

# An object is rebuilt when it is missing or older than any file its depfile lists.
up_to_date() {
  local obj=$1 dep=$1.d
  [ -f "$obj" ] && [ -f "$dep" ] || return 1
  local f
  for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$dep"); do
    [ "$f" -nt "$obj" ] && return 1
  done
  return 0
}

objects=()
for rel in "$main_cpp" "${sources[@]/#/$src/}"; do
  [ -f "$rel" ] || { echo "run_fuzz: $main_cpp names a missing source: $rel" >&2; exit 2; }
  obj=$objdir/$(echo "${rel#"$src"/}" | tr '/' '_').o
  objects+=("$obj")
  if ! up_to_date "$obj"; then
    echo "run_fuzz: compiling ${rel#"$src"/}"
    ${launcher[@]+"${launcher[@]}"} "${cxx[@]}" -MMD -MF "$obj.d.$$" -c "$rel" -o "$obj.$$"
    mv -f "$obj.d.$$" "$obj.d"
    mv -f "$obj.$$" "$obj"
  fi
done
binary=$work/$target
if ! "${cxx[@]}" "${objects[@]}" ${libs[@]+"${libs[@]}"} -o "$binary"; then
  echo "run_fuzz: link failed (libFuzzer comes from libclang-rt-14-dev; scripts/install-deps.sh installs it)" >&2
  exit 1
fi

corpora=("$work/corpus")  # new inputs go to the first directory, never into the source tree
[ -d "$src/tests/fuzz/corpus/$target" ] && corpora+=("$src/tests/fuzz/corpus/$target")
options=(-max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/")
if [ -n "$runs" ]; then options+=(-runs="$runs"); else options+=(-max_total_time="$seconds"); fi
[ -f "$src/tests/fuzz/$target.dict" ] && options+=(-dict="$src/tests/fuzz/$target.dict")

if [ -n "$runs" ]; then echo "run_fuzz: running $target for $runs executions"; else echo "run_fuzz: running $target for ${seconds}s"; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
"$binary" "${options[@]}" "${corpora[@]}" 2>&1 | tee "$work/log"
status=${PIPESTATUS[0]}
set -e
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
echo "run_fuzz: $target: ${execs:-?} executions, ${rate:-?} executions/s"
if [ $status -ne 0 ]; then
  echo "run_fuzz: $target FAILED (exit $status); crashing input saved under $work/ (crash-*, leak-*, timeout-*)" >&2
  exit 1
fi
echo "run_fuzz: $target passed"
