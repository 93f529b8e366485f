"""The two tiny transformers KimiLinear configurations used by the oracles, and a builder that
gives every parameter a non-degenerate random value (so every path matters) and rounds it to
bf16. Shared by check_vs_transformers.py and tools/fixtures/make_kimi_linear_fixtures.py."""

import math

import torch

L, F = "linear_attention", "full_attention"

# The two configs differ in every dimension: width, vocabulary, depth, layer pattern, number of
# dense layers, KDA heads / head size / conv kernel, MLA heads / ranks / head sizes, q_lora
# (None vs set), experts, top-k, shared experts, groups (1 vs 3), renormalisation, scaling, eps.
CONFIGS = {
    "kimi_linear_a": dict(
        vocab_size=384, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        num_hidden_layers=5, layer_types=[L, L, F, L, F], mlp_layer_types=["dense"] + ["sparse"] * 4,
        linear_num_heads=2, linear_head_dim=32, linear_conv_kernel_dim=4,
        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=24,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
        num_local_experts=8, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
        norm_topk_prob=True, routed_scaling_factor=2.446, rms_norm_eps=1e-5,
    ),
    "kimi_linear_b": dict(
        vocab_size=512, hidden_size=96, intermediate_size=160, moe_intermediate_size=24,
        num_hidden_layers=6, layer_types=[F, L, L, F, L, L], mlp_layer_types=["dense"] * 2 + ["sparse"] * 4,
        linear_num_heads=3, linear_head_dim=24, linear_conv_kernel_dim=3,
        num_attention_heads=6, num_key_value_heads=6, q_lora_rank=48, kv_lora_rank=32,
        qk_nope_head_dim=8, qk_rope_head_dim=16, v_head_dim=20,
        num_local_experts=12, num_experts_per_tok=3, n_shared_experts=2, n_group=3, topk_group=2,
        norm_topk_prob=False, routed_scaling_factor=1.5, rms_norm_eps=1e-6,
    ),
}

COMMON = dict(hidden_act="silu", tie_word_embeddings=False, pad_token_id=None, bos_token_id=1,
              eos_token_id=2, attention_bias=False, use_cache=False)


def make_config(name):
    from transformers import KimiLinearConfig
    return KimiLinearConfig(**CONFIGS[name], **COMMON)


@torch.no_grad()
def randomize_(model, seed):
    """Re-initialise every parameter and buffer with seeded, non-degenerate values (fp32)."""
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=g) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g) * (hi - lo) + lo

    for name, t in sorted(list(model.named_parameters()) + list(model.named_buffers())):
        shape = t.shape
        if name.endswith("embed_tokens.weight"):
            v = normal(shape, 1.0)
        elif name.endswith("A_log"):
            v = uniform(shape, 0.5, 4.0).log()                 # decay rates 0.5..4 per head
        elif name.endswith("dt_bias"):
            v = normal(shape, 0.5, -1.0)
        elif name.endswith("e_score_correction_bias"):
            v = normal(shape, 0.1)
        elif name.endswith("conv1d.weight"):
            v = normal(shape, 0.5)
        elif "norm" in name.split(".")[-2] and name.endswith("weight"):   # every RMSNorm weight
            v = uniform(shape, 0.5, 1.5)
        elif name.endswith("experts.gate_up_proj"):
            v = normal(shape, 1.0 / math.sqrt(shape[-1]))
        elif name.endswith("experts.down_proj"):
            v = normal(shape, 1.0 / math.sqrt(shape[-1]))
        elif t.dim() == 2:                                      # every Linear: [out, in]
            v = normal(shape, 1.0 / math.sqrt(shape[1]))
        else:
            print(f"[tiny] WARNING: no randomisation rule for {name} {tuple(shape)}; left as is", flush=True)
            continue
        t.copy_(v.to(t.dtype))


def build(name, seed):
    """A KimiLinearForCausalLM of the named config, random (seeded), weights rounded to bf16
    and returned in bf16."""
    from transformers import KimiLinearForCausalLM
    torch.manual_seed(seed)
    model = KimiLinearForCausalLM(make_config(name)).eval()
    randomize_(model, seed)
    return model.to(torch.bfloat16)


def save(model, out_dir):
    try:
        model.save_pretrained(out_dir, safe_serialization=True)
    except TypeError:
        model.save_pretrained(out_dir)


def load_fp32(ckpt_dir):
    """Load a saved checkpoint back in fp32 with eager attention and eager experts."""
    from transformers import KimiLinearForCausalLM
    kw = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    try:
        model, info = KimiLinearForCausalLM.from_pretrained(ckpt_dir, experts_implementation="eager", **kw)
    except Exception as e:  # older or stricter versions may refuse the keyword
        print(f"[tiny] experts_implementation='eager' refused ({e}); using the default", flush=True)
        model, info = KimiLinearForCausalLM.from_pretrained(ckpt_dir, **kw)
    print(f"[tiny] loading info: { {k: (len(v) if hasattr(v, '__len__') else v) for k, v in info.items()} }",
          flush=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise RuntimeError(f"{ckpt_dir}: loading info not clean: {bad}")
    return model.eval()


def assert_same_weights(saved_bf16_model, loaded_fp32_model):
    """Every tensor of the loaded fp32 model equals the bf16 model widened (nothing re-initialised)."""
    a = dict(saved_bf16_model.state_dict())
    b = dict(loaded_fp32_model.state_dict())
    assert sorted(a) == sorted(b), (sorted(set(a) ^ set(b)))
    for k in a:
        if not torch.equal(a[k].float(), b[k].float()):
            raise RuntimeError(f"reloaded weight differs: {k}")
    return len(a)


def rel_err(a, b):
    """max |a - b| / max |b| (b is the reference side)."""
    a = a.double()
    b = b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


@torch.no_grad()
def hf_logits(model, ids):
    return model(torch.tensor([list(ids)], dtype=torch.long), use_cache=False).logits[0].float()


@torch.no_grad()
def hf_greedy(model, ids, n):
    """n greedy tokens by full re-forward per step; also returns the smallest top1-top2 margin."""
    seq = list(ids)
    out, margin = [], float("inf")
    for _ in range(n):
        last = hf_logits(model, seq)[-1]
        top2 = torch.topk(last, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
        nxt = int(torch.argmax(last))
        seq.append(nxt)
        out.append(nxt)
    return out, margin
