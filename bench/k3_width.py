#!/usr/bin/env python3
"""The K3-width benchmark model, in one place for bench/k3_layer.sh and scripts/gpu-check.sh.

Kimi K3's real widths (hidden 7168, KDA 96 heads x 128, gated MLA 96 heads with q/kv LoRA 1536/512,
latent MoE 3584 with MXFP4 experts 3072 x 3584, 16 routed + 2 shared) but two layers (one KDA +
MoE, one MLA + MoE) and 32 experts per layer.

  k3_width.py args                  the make-tiny flags that write it (one line)
  k3_width.py report RUN.json NAME  one line from a `sluice run --json` of it: prefill, decode tok/s,
                                    the weight bytes one decode token touches and their rate
"""
import json
import sys

H, P, E, K, I, R, VOCAB = 7168, 96 * 128, 32, 16, 3072, 3584, 1024

ARGS = (f"--arch kimi_k3 --seed 3 --vocab {VOCAB} --hidden {H} --layers 2 --mla-layers 2 --dense-layers 0 "
        f"--kda-heads 96 --kda-head-dim 128 --heads 96 --q-lora 1536 --kv-lora 512 --nope 128 --rope 64 "
        f"--v-dim 128 --experts {E} --top-k {K} --shared 2 --moe-inter {I} --latent {R} --block 12 --shards 4")


def bytes_per_token():
    """Weight bytes one decode token reads: everything but the unrouted experts and the other
    vocabulary rows (BF16 spine, MXFP4 experts with one E8M0 byte per 32 weights)."""
    kda = (4 * P * H + P * H + 128 * H + P * 128 + 96 * H) * 2
    mla = (1536 * H + 96 * 192 * 1536 + 576 * H + 96 * 256 * 512 + 96 * 128 * H + H * 96 * 128) * 2
    moe = (E * H + R * H + H * R + 3 * 2 * I * H) * 2
    expert = (2 * I * R // 2 + 2 * I * R // 32) + (R * I // 2 + R * I // 32)
    return kda + mla + 2 * moe + 2 * K * expert + VOCAB * H * 2


def report(path, name):
    r = json.load(open(path))
    n = len(r["generated_ids"])
    decode_s = r["decode_ms"] / 1e3
    tps = (n - 1) / decode_s if n > 1 and decode_s > 0 else 0
    prompt = len(r["prompt_ids"])
    per_token = bytes_per_token()
    print(f"{name}: prefill {prompt} tokens in {r['prefill_ms']:.0f} ms "
          f"({prompt / max(r['prefill_ms'], 1e-9) * 1e3:.0f} tok/s), decode {tps:.2f} tok/s, "
          f"{per_token / 1e9:.3f} GB of weights per token -> {per_token * tps / 1e9:.1f} GB/s")


if __name__ == "__main__":
    if sys.argv[1:] == ["args"]:
        print(ARGS)
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
