#!/usr/bin/env python3
"""Real-width benchmark models of the architectures of issue 17, for bench/arch_layers.sh: each at
the widths of a released model (DeepSeek-V3 with FP8 weights, Kimi-K2-Thinking with INT4 routed
experts, Qwen3-235B-A22B, gpt-oss-120b with MXFP4 experts) but two layers, 16 experts per layer and a 1024-token vocabulary, all resident.

  arch_width.py args NAME            the make-tiny flags that write it (one line)
  arch_width.py report DIR RUN.json  one line from a `sluice run --json` of it: decode tok/s, the
                                     weight bytes one decode token reads, their rate
  arch_width.py names                the model names

Bytes per decode token are counted from the checkpoint's own safetensors headers: every tensor but
the routed experts and the embedding (one row is read), plus top_k experts per MoE layer, with an
FP8 kv_b counted at the F32 width it is kept at after loading (model/arch/deepseek.cpp).
"""
import json
import os
import struct
import sys

VOCAB = 1024
MODELS = {
    "deepseek_v3": ("--arch deepseek_v3 --fp8 --seed 5 --vocab 1024 --hidden 7168 --layers 2 --dense-layers 0 "
                    "--heads 128 --q-lora 1536 --kv-lora 512 --nope 128 --rope 64 --v-dim 128 --experts 16 "
                    "--top-k 8 --shared 1 --moe-inter 2048 --expert-groups 8 --topk-groups 4 --routed-scaling 2.5 "
                    "--shards 4"),
    "kimi_k2": ("--arch kimi_k2 --int4 --seed 5 --vocab 1024 --hidden 7168 --layers 2 --dense-layers 0 "
                "--heads 64 --q-lora 1536 --kv-lora 512 --nope 128 --rope 64 --v-dim 128 --experts 16 "
                "--top-k 8 --shared 1 --moe-inter 2048 --expert-groups 1 --topk-groups 1 --routed-scaling 2.827 "
                "--shards 4"),
    "qwen3_moe": ("--arch qwen3_moe --seed 5 --vocab 1024 --hidden 4096 --layers 2 --dense-layers 0 --heads 64 "
                  "--kv-heads 4 --head-dim 128 --experts 16 --top-k 8 --moe-inter 1536 --rope-theta 1000000 --shards 4"),
    "gpt_oss": ("--arch gpt_oss --seed 5 --vocab 1024 --hidden 2880 --layers 2 --heads 64 --kv-heads 8 --head-dim 64 "
                "--experts 16 --top-k 4 --moe-inter 2880 --window 128 --rope-theta 150000 --shards 2"),
}


def tensors(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                out[k] = (v["data_offsets"][1] - v["data_offsets"][0], v["shape"], v["dtype"])
    return out


def bytes_per_token(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    ts = tensors(d)
    top_k = cfg.get("num_experts_per_tok", 0)
    experts = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts")
    total = 0
    routed = 0
    for name, (nbytes, shape, dtype) in ts.items():
        if ".mlp.experts." in name:
            routed += nbytes
            continue
        if "embed_tokens" in name:
            total += nbytes // shape[0]
            continue
        if name.endswith("kv_b_proj.weight") and dtype == "F8_E4M3":
            total += nbytes * 4  # widened to F32 at load
            continue
        if name.endswith("kv_b_proj.weight_scale_inv"):
            continue
        total += nbytes
    moe_layers = cfg["num_hidden_layers"] - cfg.get("first_k_dense_replace", 0)
    per_expert = routed / (moe_layers * experts)
    return total + moe_layers * top_k * per_expert


def report(d, path):
    r = json.load(open(path))
    n = len(r["generated_ids"])
    decode_s = r["decode_ms"] / 1e3
    tps = (n - 1) / decode_s if n > 1 and decode_s > 0 else 0
    per_token = bytes_per_token(d)
    print(f"{per_token / 1e9:.3f} {tps:.3f} {per_token * tps / 1e9:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["args"] and len(sys.argv) == 3:
        print(MODELS[sys.argv[2]])
    elif sys.argv[1:2] == ["names"]:
        print(" ".join(MODELS))
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
