"""Certifies the shared parts of tools/reference/dspark_ref.py against transformers' DeepSeek-V3
modules (MLA with YaRN RoPE is DeepSeek-V3's attention; transformers' `rope_interleave=True` is the
interleaved-pair rotation): for random DSpark weights and two RoPE configurations,
  * YaRN inverse frequencies, the cos/sin magnitude and the softmax scale equal transformers';
  * one MLA layer: transformers' DeepseekV3Attention run over [context rows ; query rows] with an
    all-visible mask (DSpark's query rows see every cached row and each other; the context rows'
    keys come from kv_a of the context vector itself) equals dspark_ref.attention on its last D rows;
  * the SiLU MLP equals DeepseekV3MLP, RMSNorm equals DeepseekV3RMSNorm;
  * a whole proposal assembled from transformers modules (per layer RMSNorm + DeepseekV3Attention +
    DeepseekV3MLP, the same context path, final norm, lm_head) gives dspark_ref's logits.
Passes when every max relative error (max|ref - hf| / max|hf|) is <= --tol. Exits non-zero otherwise.

Usage: python3 check_dspark_vs_transformers.py [--tol 1e-4]
"""

import argparse
import inspect
import json
import sys
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import dspark_ref  # noqa: E402
from kimi_ref import rms_norm  # noqa: E402

# Two RoPE set-ups: K3 DSpark's (θ 50000, factor 32 over 32768, mscale 1/1) and one where mscale
# differs from mscale_all_dim (so the cos/sin magnitude is not 1), a wider rope and later positions.
CASES = [
    {"name": "k3", "theta": 50000.0, "factor": 32.0, "orig": 32768, "beta_fast": 32.0, "beta_slow": 1.0,
     "mscale": 1.0, "mscale_all_dim": 1.0, "rope": 8, "L": 11, "D": 7, "pos0": 0},
    {"name": "mscale", "theta": 10000.0, "factor": 40.0, "orig": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
     "mscale": 0.707, "mscale_all_dim": 1.0, "rope": 16, "L": 30, "D": 5, "pos0": 200},
]
H, HEADS, Q_LORA, KV_LORA, NOPE, VDIM, INTER, LAYERS, VOCAB, RANK, N_IDS = 64, 4, 32, 24, 16, 12, 96, 2, 97, 8, 3
EPS = 1e-5


def rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def dspark_config(case):
    return {"architectures": ["K3DSparkModel"], "hidden_size": H, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "q_lora_rank": Q_LORA, "kv_lora_rank": KV_LORA,
            "qk_nope_head_dim": NOPE, "qk_rope_head_dim": case["rope"], "v_head_dim": VDIM,
            "intermediate_size": INTER, "rms_norm_eps": EPS, "rope_theta": case["theta"],
            "rope_scaling": {"type": "yarn", "factor": case["factor"], "original_max_position_embeddings": case["orig"],
                             "beta_fast": case["beta_fast"], "beta_slow": case["beta_slow"],
                             "mscale": case["mscale"], "mscale_all_dim": case["mscale_all_dim"]},
            "vocab_size": VOCAB, "markov_rank": RANK, "mask_token_id": VOCAB - 2,
            "target_layer_ids": list(range(N_IDS)), "num_draft_tokens": case["D"]}


def random_tensors(case, g):
    def n(*shape, sd=None):
        sd = sd if sd is not None else shape[-1] ** -0.5
        return (torch.randn(*shape, generator=g) * sd).to(torch.bfloat16)

    def norm(k):
        return (1.0 + 0.1 * torch.randn(k, generator=g)).to(torch.bfloat16)

    qk = NOPE + case["rope"]
    t = {"context_proj.weight": n(H, N_IDS * H), "context_norm.weight": norm(H), "final_norm.weight": norm(H),
         "markov_head.markov_w1.weight": n(VOCAB, RANK), "markov_head.markov_w2.weight": n(VOCAB, RANK),
         "confidence_head.proj.weight": n(1, H + RANK), "confidence_head.proj.bias": n(1, sd=1.0),
         "embed_tokens.weight": n(VOCAB, H, sd=1.0)}
    for i in range(LAYERS):
        p, a = f"layers.{i}.", f"layers.{i}.self_attn."
        t.update({p + "input_layernorm.weight": norm(H), p + "post_attention_layernorm.weight": norm(H),
                  a + "q_a_proj.weight": n(Q_LORA, H), a + "q_a_layernorm.weight": norm(Q_LORA),
                  a + "q_b_proj.weight": n(HEADS * qk, Q_LORA),
                  a + "kv_a_proj_with_mqa.weight": n(KV_LORA + case["rope"], H),
                  a + "kv_a_layernorm.weight": norm(KV_LORA),
                  a + "kv_b_proj.weight": n(HEADS * (NOPE + VDIM), KV_LORA),
                  a + "o_proj.weight": n(H, HEADS * VDIM),
                  p + "mlp.gate_proj.weight": n(INTER, H), p + "mlp.up_proj.weight": n(INTER, H),
                  p + "mlp.down_proj.weight": n(H, INTER)})
    return t


class FakeTarget:
    """What DSparkRef needs of a target: embedding, lm_head and layer count."""

    def __init__(self, g):
        self.embed = torch.randn(VOCAB, H, generator=g).to(torch.bfloat16).float()
        self.lm_head = (torch.randn(VOCAB, H, generator=g) * H ** -0.5).to(torch.bfloat16).float()
        self.L = N_IDS + 2


def hf_config(case):
    from transformers import DeepseekV3Config
    rope = {"rope_type": "yarn", "factor": case["factor"], "original_max_position_embeddings": case["orig"],
            "beta_fast": case["beta_fast"], "beta_slow": case["beta_slow"], "mscale": case["mscale"],
            "mscale_all_dim": case["mscale_all_dim"]}
    common = dict(vocab_size=VOCAB, hidden_size=H, intermediate_size=INTER, moe_intermediate_size=16,
                  num_hidden_layers=1, num_attention_heads=HEADS, num_key_value_heads=HEADS, n_shared_experts=1,
                  n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
                  kv_lora_rank=KV_LORA, q_lora_rank=Q_LORA, qk_rope_head_dim=case["rope"], v_head_dim=VDIM,
                  qk_nope_head_dim=NOPE, hidden_act="silu", rms_norm_eps=EPS, rope_interleave=True,
                  attention_bias=False, max_position_embeddings=int(case["factor"] * case["orig"]))
    params = inspect.signature(DeepseekV3Config.__init__).parameters
    if "rope_parameters" in params:   # transformers 5.x
        cfg = DeepseekV3Config(**common, rope_parameters={**rope, "rope_theta": case["theta"]})
    else:                              # 4.x
        cfg = DeepseekV3Config(**common, rope_scaling=rope, rope_theta=case["theta"])
    cfg._attn_implementation = "eager"
    return cfg


def hf_attention(cfg, ref, i):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as M
    attn = M.DeepseekV3Attention(cfg, layer_idx=0).float().eval()
    lay = ref.layers[i]
    with torch.no_grad():
        attn.q_a_proj.weight.copy_(lay["q_a"])
        attn.q_a_layernorm.weight.copy_(lay["q_a_norm"])
        attn.q_b_proj.weight.copy_(lay["q_b"])
        attn.kv_a_proj_with_mqa.weight.copy_(lay["kv_a"])
        attn.kv_a_layernorm.weight.copy_(lay["kv_a_norm"])
        attn.kv_b_proj.weight.copy_(lay["kv_b"])
        attn.o_proj.weight.copy_(lay["o"])
    # transformers builds q_a/kv_a layernorms with its class default eps (1e-6); DSpark uses the
    # config's rms_norm_eps for every norm (as deltafin does), so align them for the comparison.
    attn.q_a_layernorm.variance_epsilon = EPS
    attn.kv_a_layernorm.variance_epsilon = EPS
    return attn


def hf_mlp(cfg, ref, i):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as M
    mlp = M.DeepseekV3MLP(cfg, intermediate_size=INTER).float().eval()
    lay = ref.layers[i]
    with torch.no_grad():
        mlp.gate_proj.weight.copy_(lay["gate"])
        mlp.up_proj.weight.copy_(lay["up"])
        mlp.down_proj.weight.copy_(lay["down"])
    return mlp


def hf_norm(w):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as M
    n = M.DeepseekV3RMSNorm(w.shape[0], eps=EPS).float()
    with torch.no_grad():
        n.weight.copy_(w)
    return n


@torch.no_grad()
def hf_proposal(cfg, ref, rotary, ctx_rows, pending):
    """A whole proposal from transformers modules: the context vector c of every committed row is
    fed to each layer's attention as its own hidden row (its kv_a gives the cached key), the query
    rows are input-normed, and the mask lets every query row see every row."""
    L, D = ctx_rows.shape[0], ref.D
    c = hf_norm(ref.context_norm)(ctx_rows @ ref.context_proj.t())
    ids = torch.tensor([pending] + [ref.mask] * (D - 1))
    x = ref.target.embed[ids]
    pos = torch.arange(L + D)[None]
    for i in range(ref.n_layers):
        lay = ref.layers[i]
        attn = hf_attention(cfg, ref, i)
        xin = hf_norm(lay["in_norm"])(x)
        hidden = torch.cat([c, xin])[None]
        cos, sin = rotary(hidden, pos)
        mask = torch.zeros(1, 1, L + D, L + D)
        x = x + attn(hidden_states=hidden, position_embeddings=(cos, sin), attention_mask=mask)[0][0, L:]
        x = x + hf_mlp(cfg, ref, i)(hf_norm(lay["post_norm"])(x))
    return hf_norm(ref.final_norm)(x) @ ref.target.lm_head.t()


@torch.no_grad()
def check_case(case, tol, seed):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as M
    print(f"=== case {case['name']}: {json.dumps(case)}", flush=True)
    g = torch.Generator().manual_seed(seed)
    target = FakeTarget(g)
    ref = dspark_ref.DSparkRef(dspark_config(case), random_tensors(case, g), target)
    cfg = hf_config(case)
    rotary = M.DeepseekV3RotaryEmbedding(cfg)
    errs = {}
    ok = True

    inv = rotary.inv_freq.double()
    errs["inv_freq"] = rel_err(ref.inv_freq, inv)
    hf_mag = float(getattr(rotary, "attention_scaling", 1.0))
    errs["rope_magnitude"] = abs(ref.rope_magnitude - hf_mag) / hf_mag
    attn0 = hf_attention(cfg, ref, 0)
    errs["softmax_scale"] = abs(ref.scale - attn0.scaling) / attn0.scaling
    print(f"    inv_freq ref {ref.inv_freq.tolist()}\n             hf  {inv.tolist()}")
    print(f"    rope magnitude ref {ref.rope_magnitude:.8g} hf {hf_mag:.8g}; softmax scale ref {ref.scale:.8g} "
          f"hf {attn0.scaling:.8g}")

    L, D, pos0 = case["L"], case["D"], case["pos0"]
    worst_attn = 0.0
    for i in range(LAYERS):
        attn = hf_attention(cfg, ref, i)
        c = torch.randn(L, H, generator=g)                                  # context vectors
        xq = torch.randn(D, H, generator=g)                                 # normed query rows
        hidden = torch.cat([c, xq])[None]
        pos = torch.arange(pos0, pos0 + L + D)[None]
        cos, sin = rotary(hidden, pos)
        mask = torch.zeros(1, 1, L + D, L + D)                              # everything visible
        hf = attn(hidden_states=hidden, position_embeddings=(cos, sin), attention_mask=mask)[0][0, L:]
        ctx_lat, ctx_kpe = ref.layer_kv(i, c, list(range(pos0, pos0 + L)))
        r = ref.attention(i, xq, list(range(pos0 + L, pos0 + L + D)), ctx_lat, ctx_kpe)
        worst_attn = max(worst_attn, rel_err(r, hf))
        # The mask matters: a causal mask over the same rows must give a different answer.
        causal = torch.triu(torch.full((L + D, L + D), float("-inf")), diagonal=1)[None, None]
        hf_causal = attn(hidden_states=hidden, position_embeddings=(cos, sin), attention_mask=causal)[0][0, L:]
        if rel_err(hf_causal, hf) < 1e-3:
            print("    the all-visible and causal masks gave the same output: the check has no power")
            ok = False
        mlp_in = torch.randn(D, H, generator=g)
        errs["mlp"] = max(errs.get("mlp", 0.0), rel_err(ref.mlp(i, mlp_in), hf_mlp(cfg, ref, i)(mlp_in)))
    errs["attention"] = worst_attn
    v = torch.randn(5, H, generator=g)
    errs["rmsnorm"] = rel_err(rms_norm(v, ref.final_norm, EPS), hf_norm(ref.final_norm)(v))

    ctx_rows = torch.randn(L, N_IDS * H, generator=g)
    pending = 5
    out = ref.propose(ctx_rows, pending)
    errs["proposal_logits"] = rel_err(out["logits"], hf_proposal(cfg, ref, rotary, ctx_rows, pending))
    for k, e in errs.items():
        good = e <= tol
        ok &= good
        print(f"    {k:16s} max rel err {e:.3e} {'ok' if good else 'FAIL'}")
    print(f"    proposal tokens {out['tokens']}, confidence {[round(x, 4) for x in out['confidence']]}")
    return ok, errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    all_ok, summary = True, {}
    for k, case in enumerate(CASES):
        try:
            ok, errs = check_case(case, args.tol, seed=100 + k)
        except Exception:
            import traceback
            traceback.print_exc()
            ok, errs = False, {}
        all_ok &= ok
        summary[case["name"]] = errs
    print("RESULT", json.dumps(summary), "PASS" if all_ok else "FAIL", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
