#!/usr/bin/env python3
"""The K3-width benchmark model, in one place for bench/k3_layer.sh and scripts/gpu-check.sh.

Kimi K3's real widths (hidden 7168, KDA 96 heads x 128, gated MLA 96 heads with q/kv LoRA 1536/512,
latent MoE 3584 with MXFP4 experts 3072 x 3584, 16 routed + 2 shared) but two layers (one KDA +
MoE, one MLA + MoE) and 32 experts per layer; or LAYERS layers (KDA and MLA alternating, MLA on
the even ones) of EXPERTS experts each (gpu-check.sh hybrid: 12 x 96).

  k3_width.py args [LAYERS EXPERTS]                  the make-tiny flags that write it (one line)
  k3_width.py report RUN.json NAME [LAYERS EXPERTS]  one line from a `sluice run --json` of it:
                                                     prefill, decode tok/s, the weight bytes one
                                                     decode token touches and their rate
"""
import json
import sys

H, P, E, K, I, R, VOCAB = 7168, 96 * 128, 32, 16, 3072, 3584, 1024
LAYERS = 2


def args(layers=LAYERS, experts=E):
    mla = ",".join(str(l) for l in range(2, layers + 1, 2))
    return (f"--arch kimi_k3 --seed 3 --vocab {VOCAB} --hidden {H} --layers {layers} --mla-layers {mla} "
            f"--dense-layers 0 --kda-heads 96 --kda-head-dim 128 --heads 96 --q-lora 1536 --kv-lora 512 "
            f"--nope 128 --rope 64 --v-dim 128 --experts {experts} --top-k {K} --shared 2 --moe-inter {I} "
            f"--latent {R} --block 12 --shards {max(4, layers * 2)}")


ARGS = args()


def expert_bytes():
    """One routed MXFP4 expert: gate and up [I, R], down [R, I], one E8M0 byte per 32 weights."""
    return (2 * I * R // 2 + 2 * I * R // 32) + (R * I // 2 + R * I // 32)


def bytes_per_token(layers=LAYERS, experts=E):
    """Weight bytes one decode token reads: everything but the unrouted experts and the other
    vocabulary rows (BF16 spine, MXFP4 experts with one E8M0 byte per 32 weights)."""
    kda = (4 * P * H + P * H + 128 * H + P * 128 + 96 * H) * 2
    mla = (1536 * H + 96 * 192 * 1536 + 576 * H + 96 * 256 * 512 + 96 * 128 * H + H * 96 * 128) * 2
    moe = (experts * H + R * H + H * R + 3 * 2 * I * H) * 2
    n_mla = layers // 2
    return (layers - n_mla) * kda + n_mla * mla + layers * moe + layers * K * expert_bytes() + VOCAB * H * 2


def report(path, name, layers=LAYERS, experts=E):
    r = json.load(open(path))
    n = len(r["generated_ids"])
    decode_s = r["decode_ms"] / 1e3
    tps = (n - 1) / decode_s if n > 1 and decode_s > 0 else 0
    prompt = len(r["prompt_ids"])
    per_token = bytes_per_token(layers, experts)
    print(f"{name}: prefill {prompt} tokens in {r['prefill_ms']:.0f} ms "
          f"({prompt / max(r['prefill_ms'], 1e-9) * 1e3:.0f} tok/s), decode {tps:.2f} tok/s, "
          f"{per_token / 1e9:.3f} GB of weights per token -> {per_token * tps / 1e9:.1f} GB/s")


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["args"] and len(a) in (1, 3):
        print(args(*map(int, a[1:])))
    elif a[:1] == ["report"] and len(a) in (3, 5):
        report(a[1], a[2], *map(int, a[3:]))
    else:
        sys.exit(__doc__)
