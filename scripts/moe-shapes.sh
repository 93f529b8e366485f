# shellcheck shell=bash
# The make-tiny flags of the streamed-decode benchmarks' models (sourced by bench-moe-stream.sh):
# 12 layers with ~1.7 GB of routed experts each, K3-shaped (the model of
# bench-k3-scaled.sh), DeepSeek-V3 with FP8 weights, Qwen3-MoE in BF16, gpt-oss with MXFP4 experts.
# shellcheck disable=SC2034
declare -A moe_flags=(
  [kimi_k3]="--layers 12 --mla-layers 4,8,12 --dense-layers 1 --experts 96 --top-k 8 --moe-inter 1024 --latent 1024 \
--hidden 1024"
  [deepseek_v3]="--arch deepseek_v3 --fp8 --hidden 1024 --layers 12 --dense-layers 1 --heads 8 --q-lora 256 --kv-lora 128 \
--nope 64 --rope 32 --v-dim 64 --dense-inter 2048 --experts 48 --top-k 8 --shared 1 --moe-inter 1024 --expert-groups 8 \
--topk-groups 4 --routed-scaling 2.5"
  [qwen3_moe]="--arch qwen3_moe --hidden 1024 --layers 12 --dense-layers 0 --heads 8 --kv-heads 2 --head-dim 128 \
--experts 48 --top-k 8 --moe-inter 512"
  [gpt_oss]="--arch gpt_oss --hidden 1024 --layers 12 --heads 8 --kv-heads 2 --head-dim 64 --experts 96 --top-k 4 \
--moe-inter 1024 --window 128 --rope-theta 150000"
)
