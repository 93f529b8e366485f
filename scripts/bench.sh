#!/usr/bin/env bash
# Runs the micro benchmarks built in a build directory (make bench passes it as $1) and prints
# their results. Kernel benchmarks are single-threaded and report ratios to a memory-read floor
# measured in the same run. BENCH_ARGS (e.g. "--benchmark_filter=mxfp4") is passed to every
# binary. Add further benchmark binaries or harness runs below.
set -euo pipefail
build="${1:-build/release}"
shopt -s nullglob
benches=("$build"/bench/*_bench)
if [ ${#benches[@]} -eq 0 ]; then
  echo "bench: no benchmark binaries in $build/bench (is libbenchmark-dev installed?)" >&2
  exit 1
fi
for bin in "${benches[@]}"; do
  [ -x "$bin" ] || continue
  echo "== $(basename "$bin")"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$bin" --benchmark_color=false ${BENCH_ARGS:-}
done
