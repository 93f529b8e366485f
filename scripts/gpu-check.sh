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
#                                       (skipped with SLUICE_GPU_SKIP_SANITIZE=1)
#   scripts/gpu-check.sh bench          on the GPU machine: gpu_bench (products vs the D2D copy
#                                       floor, tensor-core and CUDA-core products), torch's BF16
#                                       matrix peak, and a K3-width two-layer model decoding and
#                                       prefilling 4096 tokens on cuda and cuda-ffma, and
#                                       decoding on the CPU of the same machine (BENCH_DEVICES:
#                                       which of those; BENCH_PRODUCTS=0: the model alone)
#   scripts/gpu-check.sh cpu            on the GPU machine, its CPU: kernels_bench (every weight format
#                                       on one core and on every core, ratios to the read floor of
#                                       the same threads), then make-tiny's write rate and the resident
#                                       decode of the K3-width, DeepSeek-V3-width FP8 and Kimi-K2-width
#                                       INT4 models on every core, each as GB/s of weights against the
#                                       all-core floor kernels_bench measured (CPU_MODELS: which of
#                                       k3, deepseek_v3, kimi_k2; SLUICE_KERNELS_FILTER: which rows)
#   scripts/gpu-check.sh hybrid         on the GPU machine: a K3-width model of 12 layers x 96 MXFP4
#                                       experts (20 GB of experts), prepared onto the local disk and
#                                       streamed with every expert in RAM (--cache-gb 24) after a
#                                       256-token prompt: decode on cuda:0 with the device tier at a
#                                       quarter of the experts and the share of each layer's experts
#                                       computed on the CPU balanced by the measured rates
#                                       (--cpu-experts auto; the calibration goes to $WORK), with
#                                       none, 0.3 or 0.5 of them on the CPU, with the tier off (each
#                                       expert copied from RAM at every use), with it holding all,
#                                       and on the 16-core CPU;
#                                       the pinned host-to-device copy rate measured in the same run
#                                       (HYBRID_MODEL=deepseek_v3: the FP8 model of bench/arch_width.py,
#                                       8 MoE layers x 64 experts; HYBRID_ARMS, HYBRID_LAYERS,
#                                       HYBRID_EXPERTS choose other runs)
#   scripts/gpu-check.sh ncu KERNEL CASE on the GPU machine: Nsight Compute on the first launch of the
#                                       kernel named KERNEL (a regex on the function name) while
#                                       gpu_bench --quick --only CASE runs: speed of light, memory
#                                       workload, occupancy, warp states, scheduler and launch
#                                       statistics (e.g. ncu '^mma_gemv$' 'BF16 49152x7168 N=1 cuda:0')
#   scripts/gpu-check.sh profile        on the GPU machine: the K3-width model decoding on cuda:0
#                                       with SLUICE_CUDA_PROFILE=1 (per-op GPU and host time, the
#                                       GPU's idle time between ops), after a 1- and a 256-token prompt
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
  for b in "$build/sluice" "$build/tests/unit_tests" "$build/bench/gpu_bench" "$build/bench/kernels_bench"; do
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
    bash -c "$(declare -f run_carried); carry='$carry'; run_carried unit_tests --gtest_filter='GpuModel.CudaRowsAre*:GpuModel.Int4Experts*'"
}

k3_width_model() {  # the K3-width two-layer checkpoint in $work, written once per machine
  if [ ! -f "$work/config.json" ]; then
    # shellcheck disable=SC2046
    step "make-tiny K3-width 2-layer model" run_carried sluice make-tiny --out "$work" $(python3 "$root/bench/k3_width.py" args)
  fi
}

# A model of bench/arch_width.py (or "k3" for bench/k3_width.py) in $work/NAME, written once per
# machine; prints make-tiny's rate.
width_model() {
  local name=$1 dir="$work/$1" args t0
  [ -f "$dir/config.json" ] && return 0
  if [ "$name" = k3 ]; then args=$(python3 "$root/bench/k3_width.py" args); else args=$(python3 "$root/bench/arch_width.py" args "$name"); fi
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  run_carried sluice make-tiny --out "$dir" $args 2>&1 | tail -1 || return 1
  du -sb "$dir" | awk -v t0="$t0" -v t1="$(date +%s.%N)" -v n="$name" \
    '{ printf "gpu-check: make-tiny %s: %.0f MB in %.1f s = %.0f MB/s\n", n, $1 / 1e6, t1 - t0, $1 / 1e6 / (t1 - t0) }'
}

case "$mode" in
  pack) pack "${2:-build/release}" ;;
  cpu)
    setup_paths
    lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))' | sed 's/^/gpu-check: cpu /'
    echo "gpu-check: cpu flags $(grep -o -w 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    work=${WORK:-/tmp/cpu-check}
    mkdir -p "$work"
    filter=${SLUICE_KERNELS_FILTER:-'^(bf16_3072x3584|mxfp4_3072x3584|fp8_2048x7168|int4_2048x7168)/(avx2/n:1|avx512/n:(1|8)|avx512-novbmi/n:1|avx512-threads:[0-9]+/n:1)/'}
    step "kernels_bench" bash -c "$(declare -f run_carried); carry='$carry'; run_carried kernels_bench \
      --benchmark_filter='$filter' 2>&1 | tee '$work/kernels.txt' | tail -40"
    # The all-core floor: the read floor of the threaded rows (the same threads as the engine's).
    # The summary table's threaded rows (name, GB/s, floor GB/s, ratio, ratio_best), not the raw ones.
    floor=$(awk '/-threads:[0-9]+\/n:1\/manual_time/ && NF == 5 { s += $3; n++ } END { if (n) printf "%.2f", s / n }' "$work/kernels.txt")
    echo "gpu-check: all-core read floor ${floor} GB/s (mean of kernels_bench's threaded rows: one weight-sized buffer, partly in the L3)"
    prompt=$(seq -s, 11 26)
    for name in ${CPU_MODELS:-k3 deepseek_v3 kimi_k2}; do
      step "make-tiny $name" width_model "$name"
      step "$name decode on every core" bash -c "$(declare -f run_carried); carry='$carry'; run_carried sluice run \
        --model '$work/$name' --prompt-ids '$prompt' --max-new 24 --experts resident --device cpu --json >'$work/run-$name.json'"
      if [ "$name" = k3 ]; then
        line=$(python3 -c "import sys; sys.path.insert(0, '$root/bench'); import k3_width as k, json; r = json.load(open('$work/run-k3.json')); n = len(r['generated_ids']); t = (n - 1) / (r['decode_ms'] / 1e3); print(k.bytes_per_token() / 1e9, t, k.bytes_per_token() * t / 1e9)")
      else
        line=$(python3 "$root/bench/arch_width.py" report "$work/$name" "$work/run-$name.json")
      fi
      echo "$line" | awk -v n="$name" -v f="$floor" '{ printf "gpu-check: %s on every core: %.3f GB a token, %.2f tok/s, %.1f GB/s = %.2f of the all-core floor\n", n, $1, $2, $3, (f > 0 ? $3 / f : 0) }'
    done
    print_summary
    ;;
  ncu)
    setup_paths
    kernel=${2:?ncu KERNEL CASE}
    case=${3:?ncu KERNEL CASE}
    # ncu starts the binary itself, so the carried libraries go through LD_LIBRARY_PATH (the machine's
    # own glibc must be new enough for this mode).
    step "ncu $kernel in '$case'" env LD_LIBRARY_PATH="$carry/lib" ncu --clock-control none \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
      --section ComputeWorkloadAnalysis -k "regex:$kernel" -c 1 "$carry/bin/gpu_bench" --quick --only "$case"
    print_summary
    ;;
  tests)
    setup_paths
    step "op tests (cuda, cuda-ref vs cpu:scalar)" run_carried unit_tests --gtest_filter='BackendOps.*:Mathf*'
    step "model tests on cuda and cuda-ref" run_carried unit_tests --gtest_filter='GpuModel.*:StateBytesGpu.*'
    step "CPU goldens on this machine" run_carried unit_tests --gtest_filter='Golden*:Qwen3*:*MoeArch*:-Qwen3DefaultDraft*'
    if [ -n "${SLUICE_GPU_SKIP_SANITIZE:-}" ]; then print_summary; exit 0; fi
    step "compute-sanitizer memcheck" timeout 400 bash -c "$(declare -f sanitize run_carried); carry='$carry'; sanitize memcheck"
    step "compute-sanitizer racecheck" timeout 400 bash -c "$(declare -f sanitize run_carried); carry='$carry'; sanitize racecheck"
    print_summary
    ;;
  bench)
    setup_paths
    # BENCH_DEVICES: the K3-width model's devices (default all three); BENCH_PRODUCTS=0 skips
    # gpu_bench and torch's peak (a short run of the model alone).
    if [ "${BENCH_PRODUCTS:-1}" != 0 ]; then
      step "gpu_bench (products vs the copy floor)" run_carried gpu_bench
    fi
    work=${WORK:-/tmp/k3-width}
    k3_width_model
    [ "${BENCH_PRODUCTS:-1}" != 0 ] && python3 - <<'PY' 2>&1 | sed 's/^/gpu-check: /'
import torch
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
for _ in range(3): a @ b
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e0.record()
for _ in range(20): a @ b
e1.record(); torch.cuda.synchronize()
print(f"BF16 matrix peak: {2 * 8192**3 * 20 / (e0.elapsed_time(e1) / 1e3) / 1e12:.0f} TFLOP/s (torch, 8192^3, random data)")
PY
    prompt=$(seq -s, 11 266)
    long=$(seq 0 4095 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), 11 + $1 % 1000 }')
    # cuda:0 runs the products on the tensor cores, cuda-ffma:0 on the CUDA cores.
    for dev in ${BENCH_DEVICES:-cuda:0 cuda-ffma:0 cpu}; do
      n=$([ "$dev" = cpu ] && echo 6 || echo 64)
      step "K3-width decode on $dev" bash -c "$(declare -f run_carried); carry='$carry'; run_carried sluice run \
        --model '$work' --prompt-ids '$prompt' --max-new $n --experts resident --device $dev --json >'$work/run-$dev.json'"
      python3 "$root/bench/k3_width.py" report "$work/run-$dev.json" "gpu-check: K3-width $dev" || true
      [ "$dev" = cpu ] && continue
      step "K3-width prefill of 4096 tokens on $dev" bash -c "$(declare -f run_carried); carry='$carry'; run_carried \
        sluice run --model '$work' --prompt-ids '$long' --max-new 2 --experts resident --device $dev --json >'$work/run-long-$dev.json'"
      python3 "$root/bench/k3_width.py" report "$work/run-long-$dev.json" "gpu-check: K3-width $dev, 4096-token prompt" || true
    done
    print_summary
    ;;
  hybrid)
    setup_paths
    # HYBRID_MODEL: k3 (bench/k3_width.py, 12 x 96 by default) or deepseek_v3 (bench/arch_width.py's
    # FP8 model, 8 MoE layers x 64 experts by default).
    model=${HYBRID_MODEL:-k3}
    work=${WORK:-/tmp/hybrid-$model}
    if [ "$model" = k3 ]; then
      layers=${HYBRID_LAYERS:-12} experts=${HYBRID_EXPERTS:-96}
      args=$(python3 "$root/bench/k3_width.py" args "$layers" "$experts")
    else
      layers=${HYBRID_LAYERS:-8} experts=${HYBRID_EXPERTS:-64}
      args=$(python3 "$root/bench/arch_width.py" args "$model" | sed "s/--layers 2 /--layers $layers /; s/--experts 16 /--experts $experts /")
    fi
    mkdir -p "$work"
    df -h "$work" | tail -1 | sed 's/^/gpu-check: disk /'
    if [ ! -f "$work/m/config.json" ]; then
      t0=$SECONDS
      # shellcheck disable=SC2086
      step "make-tiny $model-width ${layers}x${experts}" run_carried sluice make-tiny --out "$work/m" $args
      echo "gpu-check: make-tiny $(du -sb "$work/m" | awk '{ printf "%.1f GB", $1 / 1e9 }') in $((SECONDS - t0)) s"
      step "prepare onto the local disk" run_carried sluice prepare --model "$work/m" --home "$work/h0"
    fi
    python3 - <<'PY' 2>&1 | sed 's/^/gpu-check: /'
import time, torch
n = 2 << 30
src = torch.empty(n, dtype=torch.uint8).pin_memory()
dst = torch.empty(n, dtype=torch.uint8, device="cuda")
rates = []
for _ in range(5):
    torch.cuda.synchronize(); t = time.perf_counter(); dst.copy_(src, non_blocking=True); torch.cuda.synchronize()
    rates.append(n / (time.perf_counter() - t) / 1e9)
print(f"pinned host-to-device copy: {sorted(rates)[2]:.1f} GB/s (median of 5 x 2 GiB, torch)")
PY
    # A quarter of the routed experts' bytes, from the checkpoint's headers.
    export SLUICE_CALIBRATION=${SLUICE_CALIBRATION:-$work/hybrid-rates.json}
    quarter=$(python3 -c "import sys; sys.path.insert(0, '$root/bench'); import arch_width as a; \
      print(f\"{sum(n for k, (n, s, d) in a.tensors('$work/m').items() if '.experts.' in k) / 4 / 1e9:.3f}\")")
    prompt=$(seq -s, 11 266)
    # Each arm: device, --gpu-experts-gb (quarter: a quarter of the experts), --cpu-experts, and
    # optionally "noahead" (--no-prefetch: no guesses at the next layer, so no copies ahead) or
    # "allahead" (--prefetch-precision 0: every guess RAM holds is copied ahead).
    arms=${HYBRID_ARMS:-"cuda:0,quarter,auto cuda:0,quarter,0 cuda:0,quarter,0.3 cuda:0,quarter,0.5 cuda:0,0,0 cuda:0,auto,0 cpu,auto,0"}
    rm -f "$work/hybrid-arms.jsonl"
    for arm in ${arms//quarter/$quarter}; do
      arm=${arm//,/ }
      set -- $arm
      name="${1%:0}-$2-$3${4:+-$4}"
      extra=$(case "${4:-}" in noahead) echo --no-prefetch ;; allahead) echo --prefetch-precision 0 ;; esac)
      for n in 1 33; do  # the 1-token run gives the prefill's share of the tier's counters
        if [ "$1" = cpu ] && [ "$n" = 1 ]; then continue; fi
        step "streamed on $1, --gpu-experts-gb $2 --cpu-experts $3 $extra, --max-new $n" bash -c "$(declare -f run_carried); carry='$carry'; \
          run_carried sluice run --model '$work/m' --prompt-ids '$prompt' --max-new $n --experts stream --cache-gb 24 \
          --device $1 --gpu-experts-gb $2 --cpu-experts $3 $extra --json --stats >'$work/run-$name-$n.json' 2>'$work/stats-$name-$n.txt'"
      done
      grep -h '^\[gpu tier\]\|^\[hybrid\]\|^\[store\] reader\|^\[moe\]\|^sluice: link' "$work/stats-$name-33.txt" "$work/stats-$name-1.txt" 2>/dev/null | sed 's/^/gpu-check:   /'
      if [ "$model" = k3 ]; then
        python3 "$root/bench/k3_width.py" report "$work/run-$name-33.json" "gpu-check: hybrid $name" "$layers" "$experts" || true
      else
        python3 "$root/bench/arch_width.py" report "$work/m" "$work/run-$name-33.json" | sed "s/^/gpu-check: hybrid $name: /" || true
      fi
      python3 - "$work/stats-$name-1.txt" "$work/stats-$name-33.txt" "$work/run-$name-33.json" "$name" \
        "$work/hybrid-arms.jsonl" <<'PY' | sed 's/^/gpu-check:   /'
import json, re, sys
def tier(path):  # (hits, requests, MB copied, slots, slot GB, on_host) of the [gpu tier] line
    m = re.search(r"\[gpu tier\] slots=(\d+) \(([0-9.]+) GB\).*?\((\d+)/(\d+)\) copied=([0-9.]+) MB.*?on_host=(\d+)",
                  open(path).read())
    if not m:
        return None
    slots, gb, hits, req, mb, host = map(float, m.groups())
    return hits, req, mb, slots, gb, host
def rates(path):  # the [hybrid] line's rates (GB/s): link, cores alone, link and cores together
    m = re.search(r"link ([0-9.]+) GB/s, cores ([0-9.]+) GB/s alone; ([0-9.]+) \+ ([0-9.]+) at once", open(path).read())
    return tuple(map(float, m.groups())) if m else None
run = json.load(open(sys.argv[3]))
n = len(run["generated_ids"]) - 1
arm = {"name": sys.argv[4], "tok_s": n / (run["decode_ms"] / 1e3)}
a, b = tier(sys.argv[1]), tier(sys.argv[2])
if a and b:  # the 1-token run is the prefill alone (its token comes from the prompt's logits)
    record_mb = b[4] * 1e3 / b[3] if b[3] else 0
    copied, host = (b[2] - a[2]) / n, (b[5] - a[5]) / n * record_mb
    print(f"decode: tier hit rate {(b[0] - a[0]) / max(b[1] - a[1], 1):.3f}, {copied:.0f} MB copied and {host:.0f} MB "
          f"computed on the host a token")
    arm.update(miss_mb=copied + host)
    r = rates(sys.argv[2])
    if r and r[1] > 0:  # MB over GB/s: ms
        issue_ms = (copied + host) / (r[0] + r[1])
        arm.update(shared_ms=(copied + host) / (r[2] + r[3]))
        print(f"hybrid floor as the issue defines it (miss bytes / (link + cores, each alone)): {issue_ms:.1f} ms, "
              f"decode {1e3 / arm['tok_s']:.1f} ms: {issue_ms * arm['tok_s'] / 1e3:.2f}")
with open(sys.argv[5], "a") as f:
    f.write(json.dumps(arm) + "\n")
PY
    done
    # The proposed floor: the resident step (the arm with every expert in HBM, when it ran) plus the
    # miss bytes over the link and core rates measured together.
    python3 - "$work/hybrid-arms.jsonl" <<'PY' | sed 's/^/gpu-check: /'
import json, sys
arms = [json.loads(l) for l in open(sys.argv[1])]
resident = [a for a in arms if a["name"] == "cuda-auto-0"]
if resident:
    step_ms = 1e3 / resident[-1]["tok_s"]
    for a in arms:
        if "shared_ms" in a:
            floor = step_ms + a["shared_ms"]
            print(f"hybrid {a['name']}: resident step {step_ms:.1f} ms + misses over the rates measured together "
                  f"{a['shared_ms']:.1f} ms = {floor:.1f} ms; decode {1e3 / a['tok_s']:.1f} ms: "
                  f"{floor * a['tok_s'] / 1e3:.2f} of it")
PY
    print_summary
    ;;
  profile)
    setup_paths
    work=${WORK:-/tmp/k3-width}
    k3_width_model
    for prompt in 11 "$(seq -s, 11 266)"; do
      step "K3-width on cuda:0 with SLUICE_CUDA_PROFILE=1, $(echo "$prompt" | tr ',' '\n' | wc -l)-token prompt" \
        bash -c "$(declare -f run_carried); carry='$carry'; SLUICE_CUDA_PROFILE=1 run_carried sluice run --model '$work' \
          --prompt-ids '$prompt' --max-new 64 --experts resident --device cuda:0 --json >'$work/run-profile.json'"
      python3 "$root/bench/k3_width.py" report "$work/run-profile.json" "gpu-check: K3-width cuda:0 (profiled)" || true
    done
    print_summary
    ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
