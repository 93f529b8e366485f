#!/usr/bin/env bash
# One device call, most valuable first, each part under its own timeout: the old/new FP8 and INT4
# kernels on the Xeon, the GPU op tests (rows_fast), transformers' config names, the CPU check,
# then the K3-width decode profile on the GPU.
set -u
tar xJf .gpu-carry.tar.xz
export PYTHONUNBUFFERED=1 SLUICE_GPU_SKIP_SANITIZE=1
eval "$(sed -n '/^run_carried()/,/^}/p' scripts/gpu-check.sh)"; carry=$PWD/.gpu-carry
lscpu | grep -E "Model name|^CPU\(s\)"
for b in fp8_old_new int4_old_new; do echo "== $b"; timeout 25 run_carried $b; done 2>&1 | tee $OUT/oldnew.log
timeout 90 bash -c "$(declare -f run_carried); carry=$carry; run_carried unit_tests --gtest_filter='BackendOps.*'" > $OUT/ops.log 2>&1; echo "ops rc=$?"; grep -E "FAILED|PASSED|\[ops\].*(rmsnorm|attn_res).*cuda" $OUT/ops.log | head -20
(timeout 20 python3 tools/fixtures/save_transformers_configs.py $OUT/tcfg > $OUT/tcfg.log 2>&1; tar czf $OUT/tcfg.tgz -C $OUT tcfg; rm -rf $OUT/tcfg)
SLUICE_KERNELS_FILTER='^(bf16_3072x3584|mxfp4_3072x3584|fp8_2048x7168|int4_2048x7168)/(avx512/n:1|avx512-novbmi/n:1|avx512-threads:[0-9]+/n:1)/' timeout 170 bash scripts/gpu-check.sh cpu > $OUT/cpu.log 2>&1
grep -E "gpu-check|_2048x7168|_3072x3584" $OUT/cpu.log | grep -v "^\[" | tail -30
timeout 70 bash scripts/gpu-check.sh profile > $OUT/profile.log 2>&1; grep -E "gpu-check|ms|idle" $OUT/profile.log | tail -30
