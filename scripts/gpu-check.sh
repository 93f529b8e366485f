#!/usr/bin/env bash
# The GPU suite of the CUDA backend, for an NVIDIA GPU machine (an H200 in our runs).
#
#   scripts/gpu-check.sh pack [BUILD]   on the build machine: copies the built binaries (sluice,
#                                       unit_tests, gpu_bench) and the shared libraries they load
#                                       into .gpu-carry/ (the GPU machine's image lacks our
#                                       Debian libraries, so they travel with the binaries)
#   scripts/gpu-check.sh tests          on the GPU machine: the op tests (every op on cuda and
#                                       cuda-ref vs cpu:scalar), the model tests (cuda-ref ==
#                                       scalar digests, goldens, batch invariance, commit-prefix,
#                                       drafting on == off, streamed == resident), then
#                                       compute-sanitizer memcheck and racecheck on a tiny model
#   scripts/gpu-check.sh bench          on the GPU machine: gpu_bench (products vs the D2D copy
#                                       floor) and a K3-width two-layer model decoding on cuda and
#                                       on the CPU of the same machine
# Each step prints a line "gpu-check: STEP ok|FAILED ..." and the last lines are a summary table.
# The binaries carry SLUICE_SOURCE_DIR of the build machine (/work/main for ours): the script
# links that path to this checkout when it is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.gpu-carry"
mode=${1:-}

pack() {
  local build=${1:-build/release}
  rm -rf "$carry" && mkdir -p "$carry/bin" "$carry/lib" "$carry/glibc"
  for b in "$build/sluice" "$build/tests/unit_tests" "$build/bench/gpu_bench"; do
    [ -x "$b" ] || { echo "gpu-check: $b is not built" >&2; exit 1; }
    strip -o "$carry/bin/$(basename "$b")" "$b"
  done
  # Shared libraries: glibc's own go apart (used only when the GPU machine's glibc is older).
  for lib in $(ldd "$carry"/bin/* | awk '$3 ~ /^\// { print $3 } $1 ~ /^\/lib64/ { print $1 }' | sort -u); do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|ld-linux*|libresolv.so.*|libpthread.so.*|libdl.so.*|librt.so.*) cp -L "$lib" "$carry/glibc/" ;;
      *) cp -L "$lib" "$carry/lib/" ;;
    esac
  done
  grep -o 'SLUICE_SOURCE_DIR=[^ ]*' "$build/build.ninja" | head -1 | sed 's/^SLUICE_SOURCE_DIR=//; s/[\\"]//g' >"$carry/source_dir"
  ldd --version | head -1 | awk '{ print $NF }' >"$carry/glibc_version"
  git -C "$root" describe --always --dirty >"$carry/commit"
  du -sh "$carry"
}

# Runs a carried binary with its libraries (and its glibc when the machine's is older).
run_carried() {
  local bin=$1
  shift
  local want have
  want=$(cat "$carry/glibc_version")
  have=$(ldd --version 2>/dev/null | head -1 | awk '{ print $NF }')
  if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ]; then
    LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$carry/bin/$bin" "$@"
  else
    "$carry/glibc/ld-linux-x86-64.so.2" --library-path "$carry/lib:$carry/glibc" "$carry/bin/$bin" "$@"
  fi
}

setup_paths() {
  [ -d "$carry/bin" ] || { echo "gpu-check: no .gpu-carry/ (run 'scripts/gpu-check.sh pack BUILD' on the build machine)" >&2; exit 1; }
  local src
  src=$(cat "$carry/source_dir")
  if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src/CMakeLists.txt" ]; then
    mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src"
  fi
  export NCCL_NVLS_ENABLE=0
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu-check: gpu /'
  run_carried sluice devices
}

summary=()
step() {  # step NAME COMMAND...: runs it, records ok/FAILED with its time
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== $name"
  "$@"
  local rc=$?
  local line
  line=$(printf '| %s | %s | %ds |' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc)")" $((SECONDS - t0)))
  summary+=("$line")
  echo "gpu-check: $name $([ $rc -eq 0 ] && echo ok || echo FAILED)"
}
print_summary() {
  echo
  echo "| step | result | time |"
  echo "|---|---|---:|"
  printf '%s\n' "${summary[@]}"
  echo "binaries built from commit $(cat "$carry/commit" 2>/dev/null || echo unknown)"
}

sanitize() {  # sanitize TOOL: one model test under compute-sanitizer
  local tool=$1
  command -v compute-sanitizer >/dev/null || { echo "gpu-check: compute-sanitizer not found"; return 1; }
  SLUICE_GPU_TEST_QUICK=1 compute-sanitizer --tool "$tool" --error-exitcode 9 --target-processes all \
    bash -c "$(declare -f run_carried); carry='$carry'; run_carried unit_tests --gtest_filter='GpuModel.CudaRowsAre*'"
}

case "$mode" in
  pack) pack "${2:-build/release}" ;;
  tests)
    setup_paths
    step "op tests (cuda, cuda-ref vs cpu:scalar)" run_carried unit_tests --gtest_filter='BackendOps.*:Mathf*'
    step "model tests on cuda and cuda-ref" run_carried unit_tests --gtest_filter='GpuModel.*'
    step "CPU goldens on this machine" run_carried unit_tests --gtest_filter='Golden*:Qwen3*:-Qwen3DefaultDraft*'
    step "compute-sanitizer memcheck" timeout 400 bash -c "$(declare -f sanitize run_carried); carry='$carry'; sanitize memcheck"
    step "compute-sanitizer racecheck" timeout 400 bash -c "$(declare -f sanitize run_carried); carry='$carry'; sanitize racecheck"
    print_summary
    ;;
  bench)
    setup_paths
    step "gpu_bench (products vs the copy floor)" run_carried gpu_bench
    work=${WORK:-/tmp/k3-width}
    if [ ! -f "$work/config.json" ]; then
      step "make-tiny K3-width 2-layer model" run_carried sluice make-tiny --arch kimi_k3 --out "$work" --seed 3 \
        --vocab 1024 --hidden 7168 --layers 2 --mla-layers 2 --dense-layers 0 --kda-heads 96 --kda-head-dim 128 \
        --heads 96 --q-lora 1536 --kv-lora 512 --nope 128 --rope 64 --v-dim 128 --experts 32 --top-k 16 --shared 2 \
        --moe-inter 3072 --latent 3584 --block 12 --shards 4
    fi
    prompt=$(seq -s, 11 266)
    for dev in cuda:0 cpu; do
      n=$([ "$dev" = cpu ] && echo 6 || echo 64)
      step "K3-width decode on $dev" bash -c "$(declare -f run_carried); carry='$carry'; run_carried sluice run \
        --model '$work' --prompt-ids '$prompt' --max-new $n --experts resident --device $dev --json >'$work/run-$dev.json'"
      python3 - "$work/run-$dev.json" "$dev" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
n = len(r["generated_ids"])
tps = (n - 1) / (r["decode_ms"] / 1e3) if n > 1 and r["decode_ms"] > 0 else 0
H, P, E, k, I, R = 7168, 96 * 128, 32, 16, 3072, 3584
kda = (4 * P * H + P * H + 128 * H + P * 128 + 96 * H) * 2
mla = (1536 * H + 96 * 192 * 1536 + 576 * H + 96 * 256 * 512 + 96 * 128 * H + H * 96 * 128) * 2
moe = (E * H + R * H + H * R + 3 * 2 * I * H) * 2
expert = (2 * I * R // 2 + 2 * I * R // 32) + (R * I // 2 + R * I // 32)
per_token = kda + mla + 2 * moe + 2 * k * expert + 1024 * H * 2
print(f"gpu-check: K3-width {sys.argv[2]}: prefill {len(r['prompt_ids'])} tokens in {r['prefill_ms']:.0f} ms "
      f"({len(r['prompt_ids']) / max(r['prefill_ms'], 1e-9) * 1e3:.0f} tok/s), decode {tps:.2f} tok/s, "
      f"{per_token / 1e9:.3f} GB of weights per token -> {per_token * tps / 1e9:.1f} GB/s")
PY
    done
    print_summary
    ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
