"""Plain fp32 PyTorch reference of the two Kimi hybrid architectures sluice runs:
kimi_linear (exactly as transformers 5.17 computes it) and kimi_k3 (specs/kimi-k3.md §2).
Reads a Hugging Face-style checkpoint directory; written for clarity, not speed (the KDA
recurrence runs token by token, MLA uses the expanded form with a causal mask).

Usage as a library:  m = load_model(dir); m.forward(ids) -> [T, V]; m.greedy(ids, n) -> n ids
Usage as a script:   python kimi_ref.py CKPT_DIR --ids 1,2,3 --new 8
"""

import argparse
import glob
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open

# ---------------------------------------------------------------------------------------------
# Checkpoint reading
# ---------------------------------------------------------------------------------------------


def read_tensors(ckpt_dir):
    """All tensors of every *.safetensors file in the directory, as stored (dtype untouched)."""
    files = sorted(glob.glob(os.path.join(ckpt_dir, "*.safetensors")))
    files = [f for f in files if os.path.basename(f) != "expected.safetensors"]
    if not files:
        raise FileNotFoundError(f"{ckpt_dir}: no *.safetensors files")
    tensors = {}
    for path in files:
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                if name in tensors:
                    raise ValueError(f"{path}: tensor {name} appears in two files")
                tensors[name] = f.get_tensor(name)
    return tensors


def widen(t):
    """bf16/f16/f32 -> fp32 (exact widening)."""
    if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"expected a float tensor, got {t.dtype}")
    return t.to(torch.float32)


# E2M1 code -> value; bit 3 is the sign, magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                      -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=torch.float64)


def dequant_mxfp4(packed, scale):
    """compressed-tensors mxfp4-pack-quantized -> exact fp32 matrix [rows, cols].
    packed U8 [rows, cols/2] (low nibble = even column), scale U8 [rows, cols/32] (E8M0)."""
    assert packed.dtype == torch.uint8 and scale.dtype == torch.uint8, (packed.dtype, scale.dtype)
    rows, half = packed.shape
    cols = half * 2
    assert scale.shape == (rows, cols // 32), (packed.shape, scale.shape)
    s = scale.to(torch.int64)
    if bool(((s == 0) | (s == 255)).any()):
        raise ValueError("MXFP4 scale byte 0 or 255 (not a finite normal power of two)")
    p = packed.to(torch.int64)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(rows, cols)
    values = _E2M1[codes]                                               # float64, exact
    pow2 = torch.pow(torch.tensor(2.0, dtype=torch.float64), (s - 127).to(torch.float64))
    w = values * pow2.repeat_interleave(32, dim=1)                      # exact in float64
    w32 = w.to(torch.float32)
    assert torch.equal(w32.to(torch.float64), w), "MXFP4 value not representable in fp32"
    return w32


# ---------------------------------------------------------------------------------------------
# Primitives (all fp32)
# ---------------------------------------------------------------------------------------------


def linear(x, w):
    return x @ w.t()


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def l2norm(x, eps=1e-6):
    """fla / transformers form: x / sqrt(sum x^2 + eps)."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def silu(x):
    return x * torch.sigmoid(x)


def situ(g, u, beta_g, beta_u):
    """SiTU (spec §2.7): [b_g tanh(g/b_g) sigmoid(g)] * [b_u tanh(u/b_u)]."""
    return (beta_g * torch.tanh(g / beta_g) * torch.sigmoid(g)) * (beta_u * torch.tanh(u / beta_u))


def softplus_like_transformers(x):
    return torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))


def causal_conv_silu(x, w):
    """Depthwise causal conv, zero history, then SiLU. x [T, C], w [C, K] (oldest tap first)."""
    T, C = x.shape
    K = w.shape[1]
    padded = torch.cat([torch.zeros(K - 1, C, dtype=x.dtype), x], dim=0)
    y = torch.zeros_like(x)
    for j in range(K):
        y = y + w[:, j] * padded[j:j + T]
    return silu(y)


# ---------------------------------------------------------------------------------------------
# Layers shared by both architectures
# ---------------------------------------------------------------------------------------------


def kda(x, p, num_heads, head_dim, o_norm_eps, gate_kind, gate_lower_bound=None):
    """Kimi Delta Attention over a whole sequence from zero state. x [T, D] (already normalised).
    gate_kind 'softplus' (kimi_linear): g = -exp(A_log[h]) * softplus(f_b(f_a(x)) + dt_bias)
    gate_kind 'lower_bound' (K3):       g = lb * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias))
    Output gate: p['g_proj'] (full rank) or p['g_a'], p['g_b'] (low rank). Returns [T, D]."""
    T = x.shape[0]
    H, K = num_heads, head_dim
    q = causal_conv_silu(linear(x, p["q_proj"]), p["q_conv"])
    k = causal_conv_silu(linear(x, p["k_proj"]), p["k_conv"])
    v = causal_conv_silu(linear(x, p["v_proj"]), p["v_conv"])
    q = l2norm(q.view(T, H, K)) * (1.0 / math.sqrt(K))
    k = l2norm(k.view(T, H, K))
    v = v.view(T, H, -1)

    r = (linear(linear(x, p["f_a"]), p["f_b"]) + p["dt_bias"]).view(T, H, K)
    a = torch.exp(p["A_log"]).view(1, H, 1)                               # one value per head
    if gate_kind == "softplus":
        g = -a * softplus_like_transformers(r)
    elif gate_kind == "lower_bound":
        g = gate_lower_bound * torch.sigmoid(a * r)
    else:
        raise ValueError(gate_kind)
    alpha = torch.exp(g)                                                   # [T, H, K]
    beta = torch.sigmoid(linear(x, p["b_proj"]))                           # [T, H]

    S = torch.zeros(H, K, v.shape[-1], dtype=torch.float32)               # [H, K, V]
    out = torch.zeros(T, H, v.shape[-1], dtype=torch.float32)
    for t in range(T):
        S = S * alpha[t].unsqueeze(-1)                                     # decay along K
        kv_mem = (S * k[t].unsqueeze(-1)).sum(dim=1)                       # S^T k  [H, V]
        delta = (v[t] - kv_mem) * beta[t].unsqueeze(-1)
        S = S + k[t].unsqueeze(-1) * delta.unsqueeze(1)                    # + beta k delta^T
        out[t] = (S * q[t].unsqueeze(-1)).sum(dim=1)                       # S^T q

    o = rms_norm(out, p["o_norm"], o_norm_eps)                             # per head over V
    if "g_proj" in p:
        gate = linear(x, p["g_proj"])
    else:
        gate = linear(linear(x, p["g_a"]), p["g_b"])
    o = o * torch.sigmoid(gate.view(T, H, -1))
    return linear(o.reshape(T, -1), p["o_proj"])


def mla(x, p, num_heads, q_lora_rank, kv_lora_rank, nope, rope, v_dim, norm_eps, output_gate):
    """Multi-head latent attention without any rotary embedding (expanded form, causal mask).
    x [T, D] (already normalised). Returns [T, D]."""
    T = x.shape[0]
    H = num_heads
    if q_lora_rank:
        q = linear(rms_norm(linear(x, p["q_a_proj"]), p["q_a_layernorm"], norm_eps), p["q_b_proj"])
    else:
        q = linear(x, p["q_proj"])
    q = q.view(T, H, nope + rope)
    c = linear(x, p["kv_a_proj_with_mqa"])
    lat = rms_norm(c[:, :kv_lora_rank], p["kv_a_layernorm"], norm_eps)
    k_pe = c[:, kv_lora_rank:]                                             # shared by all heads
    kv = linear(lat, p["kv_b_proj"]).view(T, H, nope + v_dim)
    k = torch.cat([kv[..., :nope], k_pe.unsqueeze(1).expand(T, H, rope)], dim=-1)
    v = kv[..., nope:]
    scores = torch.einsum("thd,shd->hts", q, k) * (nope + rope) ** -0.5
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    a = torch.einsum("hts,shd->thd", probs, v).reshape(T, H * v_dim)
    if output_gate:
        a = a * torch.sigmoid(linear(x, p["g_proj"]))
    return linear(a, p["o_proj"])


def route(x, gate_w, bias, top_k, n_group, topk_group, renormalize, scaling):
    """Sigmoid router with correction bias and group-limited top-k (transformers' form).
    Returns (indices [T, k], weights [T, k]); the weights use uncorrected scores."""
    T = x.shape[0]
    E = gate_w.shape[0]
    scores = torch.sigmoid(linear(x, gate_w))
    choice = scores + bias
    if n_group > 1:
        group_scores = choice.view(T, n_group, E // n_group).topk(2, dim=-1)[0].sum(-1)
        group_idx = torch.topk(group_scores, k=topk_group, dim=-1)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)
        score_mask = group_mask.unsqueeze(-1).expand(T, n_group, E // n_group).reshape(T, E)
        choice = choice.masked_fill(score_mask == 0, float("-inf"))
    idx = torch.topk(choice, k=top_k, dim=-1)[1]                           # descending choice
    w = scores.gather(1, idx)
    if renormalize:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * scaling


def routed_experts(z, idx, w, experts, act):
    """Sum over route order of w_i * W2_e (act(W1_e z, W3_e z)). experts: list of (w1, w2, w3)."""
    out = torch.zeros(z.shape[0], experts[0][1].shape[0], dtype=torch.float32)
    for t in range(z.shape[0]):
        for j in range(idx.shape[1]):
            w1, w2, w3 = experts[int(idx[t, j])]
            h = act(linear(z[t], w1), linear(z[t], w3))
            out[t] = out[t] + w[t, j] * linear(h, w2)
    return out


def gated_mlp(x, gate, up, down, act):
    return linear(act(linear(x, gate), linear(x, up)), down)


# ---------------------------------------------------------------------------------------------
# Name lookup
# ---------------------------------------------------------------------------------------------


class Weights:
    """Tensor dict with lookup over alternative names; records which alternative was used."""

    def __init__(self, tensors):
        self.t = tensors
        self.used = set()
        self.naming = {}

    def has(self, name):
        return name in self.t

    def get(self, *names, kind=None):
        for n in names:
            if n in self.t:
                self.used.add(n)
                if kind is not None:
                    self.naming.setdefault(kind, set()).add(re.sub(r"\.\d+\.", ".*.", n))
                return self.t[n]
        raise KeyError(f"missing tensor: one of {names}")

    def unused(self):
        return sorted(set(self.t) - self.used)


def _cfg(c, *keys, default=KeyError):
    for k in keys:
        if k in c and c[k] is not None:
            return c[k]
    if default is KeyError:
        raise KeyError(f"config: missing {keys}")
    return default


# ---------------------------------------------------------------------------------------------
# kimi_linear (transformers 5.17 KimiLinearForCausalLM)
# ---------------------------------------------------------------------------------------------


class KimiLinearRef:
    def __init__(self, config, tensors, verbose=True):
        c = config
        self.c = c
        self.D = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.eps = c["rms_norm_eps"]
        assert c.get("hidden_act", "silu") == "silu", c.get("hidden_act")
        lac = c.get("linear_attn_config") or {}
        self.kda_heads = _cfg(c, "linear_num_heads", default=None) or lac["num_heads"]
        self.kda_dim = _cfg(c, "linear_head_dim", default=None) or lac["head_dim"]
        self.conv_k = _cfg(c, "linear_conv_kernel_dim", default=None) or lac["short_conv_kernel_size"]
        layer_types = c.get("layer_types")
        if layer_types is None:
            layer_types = [None] * self.L
            for i in lac["full_attn_layers"]:
                layer_types[i - 1] = "full_attention"
            for i in lac["kda_layers"]:
                layer_types[i - 1] = "linear_attention"
        self.layer_types = layer_types
        mlp_types = c.get("mlp_layer_types")
        if mlp_types is None:
            fk = c.get("first_k_dense_replace", 1)
            mlp_types = ["dense" if i < fk else "sparse" for i in range(self.L)]
        self.mlp_types = mlp_types
        self.heads = c["num_attention_heads"]
        assert _cfg(c, "num_key_value_heads", default=self.heads) == self.heads
        self.q_lora = c.get("q_lora_rank")
        self.kv_lora = c["kv_lora_rank"]
        self.nope, self.rope, self.vdim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.E = _cfg(c, "num_experts", "num_local_experts", "n_routed_experts")
        self.top_k = _cfg(c, "num_experts_per_token", "num_experts_per_tok")
        self.n_group = _cfg(c, "num_expert_group", "n_group", default=1)
        self.topk_group = _cfg(c, "topk_group", default=1)
        self.renorm = _cfg(c, "moe_renormalize", "norm_topk_prob", default=True)
        self.scaling = _cfg(c, "routed_scaling_factor", default=1.0)
        # transformers' KimiLinearRMSNorm default eps (q_a/kv_a layernorms are built without eps)
        self.mla_norm_eps = 1e-6

        W = Weights(tensors)
        f = lambda *n, kind=None: widen(W.get(*n, kind=kind))
        self.embed = f("model.embed_tokens.weight")
        self.norm = f("model.norm.weight")
        self.lm_head = f("lm_head.weight")
        self.layers = []
        P = self.kda_heads * self.kda_dim
        for l in range(self.L):
            pre = f"model.layers.{l}."
            a = pre + "self_attn."
            lay = {"in_norm": f(pre + "input_layernorm.weight"),
                   "post_norm": f(pre + "post_attention_layernorm.weight")}
            if layer_types[l] == "linear_attention":
                p = {n: f(a + n + ".weight") for n in ("q_proj", "k_proj", "v_proj", "b_proj", "o_proj")}
                p["g_a"] = f(a + "g_a_proj.weight")
                p["g_b"] = f(a + "g_b_proj.weight")
                p["o_norm"] = f(a + "o_norm.weight")
                if W.has(a + "q_conv1d.weight"):
                    for n in "qkv":
                        p[n + "_conv"] = f(a + f"{n}_conv1d.weight", kind="conv").reshape(P, -1)
                else:
                    packed = f(a + "conv1d.weight", kind="conv").reshape(3 * P, -1)
                    p["q_conv"], p["k_conv"], p["v_conv"] = packed[:P], packed[P:2 * P], packed[2 * P:]
                p["f_a"] = f(a + "f_a_proj.weight", a + "forget_gate.f_a_proj.weight", kind="forget_gate")
                p["f_b"] = f(a + "f_b_proj.weight", a + "forget_gate.f_b_proj.weight", kind="forget_gate")
                p["dt_bias"] = f(a + "dt_bias", a + "forget_gate.dt_bias", kind="forget_gate").reshape(-1)
                p["A_log"] = f(a + "A_log", a + "forget_gate.A_log", kind="forget_gate").reshape(-1)
                assert p["A_log"].numel() == self.kda_heads, p["A_log"].shape
                assert p["q_conv"].shape == (P, self.conv_k), p["q_conv"].shape
                lay["kda"] = p
            elif layer_types[l] == "full_attention":
                names = ["kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj"]
                names += ["q_a_proj", "q_a_layernorm", "q_b_proj"] if self.q_lora else ["q_proj"]
                lay["mla"] = {n: f(a + n + ".weight") for n in names}
            else:
                raise ValueError(f"layer {l}: unknown layer type {layer_types[l]}")
            if mlp_types[l] == "dense":
                # transformers 5.17 save_pretrained renames every `.mlp.` to `.block_sparse_moe.`,
                # the dense MLP included; Moonshot's checkpoints keep `mlp.` for it.
                lay["dense"] = [f(pre + f"mlp.{n}.weight", pre + f"block_sparse_moe.{n}.weight", kind="dense MLP")
                                for n in ("gate_proj", "up_proj", "down_proj")]
            else:
                moe = {}
                for kind, m in (("moe:block_sparse_moe", pre + "block_sparse_moe."), ("moe:mlp", pre + "mlp.")):
                    if W.has(m + "gate.weight"):
                        W.naming.setdefault("moe prefix", set()).add(re.sub(r"\.\d+\.", ".*.", m))
                        break
                moe["gate"] = f(m + "gate.weight")
                moe["bias"] = f(m + "gate.e_score_correction_bias").reshape(-1)
                moe["shared"] = [f(m + f"shared_experts.{n}.weight") for n in ("gate_proj", "up_proj", "down_proj")]
                if W.has(m + "experts.gate_up_proj"):
                    W.naming.setdefault("experts", set()).add("3-D experts.gate_up_proj / experts.down_proj")
                    gu = f(m + "experts.gate_up_proj")
                    dn = f(m + "experts.down_proj")
                    I = gu.shape[1] // 2
                    moe["experts"] = [(gu[e, :I], dn[e], gu[e, I:]) for e in range(self.E)]
                else:
                    W.naming.setdefault("experts", set()).add("per-expert experts.{E}.w1/w2/w3.weight")
                    moe["experts"] = [tuple(f(m + f"experts.{e}.w{i}.weight") for i in (1, 2, 3))
                                      for e in range(self.E)]
                lay["moe"] = moe
            self.layers.append(lay)
        left = W.unused()
        if left:
            raise ValueError(f"unused tensors in checkpoint: {left[:10]} ...")
        self.naming = {k: sorted(v) for k, v in sorted(W.naming.items())}
        if verbose:
            print(f"[kimi_ref] kimi_linear checkpoint naming: {self.naming}", flush=True)

    # -- modules (also used by the module-by-module check) --
    def kda_layer(self, l, x):
        return kda(x, self.layers[l]["kda"], self.kda_heads, self.kda_dim, self.eps, "softplus")

    def mla_layer(self, l, x):
        return mla(x, self.layers[l]["mla"], self.heads, self.q_lora, self.kv_lora, self.nope, self.rope,
                   self.vdim, self.mla_norm_eps, output_gate=False)

    def mlp_layer(self, l, x):
        lay = self.layers[l]
        if "dense" in lay:
            return gated_mlp(x, *lay["dense"], act=lambda g, u: silu(g) * u)
        m = lay["moe"]
        idx, w = route(x, m["gate"], m["bias"], self.top_k, self.n_group, self.topk_group,
                       self.renorm, self.scaling)
        act = lambda g, u: silu(g) * u
        return routed_experts(x, idx, w, m["experts"], act) + gated_mlp(x, *m["shared"], act=act)

    def forward(self, ids, capture=None):
        """Logits [T, V]; with `capture` (zero-based layer ids) also the residual stream after each
        listed layer, [T, len(capture) * D] concatenated in list order (see _captured)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        h = self.embed[ids]
        rows = {}
        for l, lay in enumerate(self.layers):
            x = rms_norm(h, lay["in_norm"], self.eps)
            h = h + (self.kda_layer(l, x) if "kda" in lay else self.mla_layer(l, x))
            h = h + self.mlp_layer(l, rms_norm(h, lay["post_norm"], self.eps))
            rows[l] = h
        logits = linear(rms_norm(h, self.norm, self.eps), self.lm_head)
        return logits if capture is None else (logits, _captured(rows, capture, self.L))

    def greedy(self, ids, n):
        return greedy(self, ids, n)


# ---------------------------------------------------------------------------------------------
# kimi_k3 (spec §2)
# ---------------------------------------------------------------------------------------------


class KimiK3Ref:
    PREFIX = "language_model."

    def __init__(self, root_config, tensors, verbose=True):
        assert root_config.get("model_type") == "kimi_k3", root_config.get("model_type")
        c = root_config["text_config"]
        self.c = c
        self.D = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.eps = c["rms_norm_eps"]
        assert c.get("hidden_act", "situ") == "situ", c.get("hidden_act")
        self.beta_g = c["activation_situ_beta"]
        self.beta_u = c["activation_situ_linear_beta"]
        lac = c["linear_attn_config"]
        self.kda_heads, self.kda_dim = lac["num_heads"], lac["head_dim"]
        self.conv_k = lac["short_conv_kernel_size"]
        self.lower_bound = lac["gate_lower_bound"]
        assert lac.get("use_full_rank_gate", True), "K3 reference implements the full-rank KDA gate only"
        kinds = [None] * self.L
        for i in lac["kda_layers"]:
            kinds[i - 1] = "kda"
        for i in lac["full_attn_layers"]:
            assert kinds[i - 1] is None, f"layer {i} (1-based) listed twice"
            kinds[i - 1] = "mla"
        assert None not in kinds, f"layer schedule incomplete: {kinds}"
        self.kinds = kinds
        self.block = c["attn_res_block_size"]
        self.heads = c["num_attention_heads"]
        self.q_lora, self.kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
        self.nope, self.rope, self.vdim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        assert c.get("mla_use_nope", True), "K3 MLA is NoPE"
        self.mla_gate = c.get("mla_use_output_gate", True)
        self.E = c["num_experts"]
        self.top_k = c["num_experts_per_token"]
        self.use_grouped = c.get("use_grouped_topk", True)
        self.n_group = c.get("num_expert_group", 1) if self.use_grouped else 1
        self.topk_group = c.get("topk_group", 1) if self.use_grouped else 1
        self.renorm = c.get("moe_renormalize", True)
        self.scaling = c.get("routed_scaling_factor", 1.0)
        self.latent_norm = c.get("latent_moe_use_norm", True)
        assert c.get("moe_router_activation_func", "sigmoid") == "sigmoid"
        fk = c.get("first_k_dense_replace", 1)
        freq = c.get("moe_layer_freq", 1)
        self.is_moe = [l >= fk and l % freq == 0 for l in range(self.L)]

        W = Weights(tensors)
        P_ = self.PREFIX

        def f(name):
            return widen(W.get(P_ + name))

        self.embed = f("model.embed_tokens.weight")
        self.lm_head = f("lm_head.weight")
        self.norm = f("model.norm.weight")
        self.out_res = (f("model.output_attn_res_norm.weight"), f("model.output_attn_res_proj.weight"))
        P = self.kda_heads * self.kda_dim
        self.layers = []
        for l in range(self.L):
            pre = f"model.layers.{l}."
            a = pre + "self_attn."
            lay = {"in_norm": f(pre + "input_layernorm.weight"),
                   "post_norm": f(pre + "post_attention_layernorm.weight"),
                   "attn_res": (f(pre + "self_attention_res_norm.weight"), f(pre + "self_attention_res_proj.weight")),
                   "mlp_res": (f(pre + "mlp_res_norm.weight"), f(pre + "mlp_res_proj.weight"))}
            if kinds[l] == "kda":
                p = {n: f(a + n + ".weight") for n in ("q_proj", "k_proj", "v_proj", "g_proj", "b_proj", "o_proj")}
                p["f_a"] = f(a + "f_a_proj.weight")
                p["f_b"] = f(a + "f_b_proj.weight")
                p["o_norm"] = f(a + "o_norm.weight")
                for n in "qkv":
                    p[n + "_conv"] = f(a + f"{n}_conv1d.weight").reshape(P, -1)
                    assert p[n + "_conv"].shape == (P, self.conv_k)
                p["dt_bias"] = f(a + "dt_bias").reshape(-1)
                A = f(a + "A_log").reshape(-1)
                assert A.numel() >= self.kda_heads, f"layer {l}: A_log has {A.numel()} < {self.kda_heads} entries"
                assert bool((A[self.kda_heads:] == 0).all()), f"layer {l}: A_log padding is not zero"
                p["A_log"] = A[:self.kda_heads].clone()
                lay["kda"] = p
            else:
                names = ["q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm",
                         "kv_b_proj", "o_proj"] + (["g_proj"] if self.mla_gate else [])
                lay["mla"] = {n: f(a + n + ".weight") for n in names}
            if not self.is_moe[l]:
                lay["dense"] = [f(pre + f"mlp.{n}.weight") for n in ("gate_proj", "up_proj", "down_proj")]
            else:
                m = pre + "block_sparse_moe."
                moe = {"gate": f(m + "gate.weight"),
                       "bias": f(m + "gate.e_score_correction_bias").reshape(-1),
                       "down": f(m + "routed_expert_down_proj.weight"),
                       "up": f(m + "routed_expert_up_proj.weight"),
                       "shared": [f(m + f"shared_experts.{n}.weight") for n in ("gate_proj", "up_proj", "down_proj")]}
                if self.latent_norm:
                    moe["norm"] = f(m + "routed_expert_norm.weight")
                ex = []
                for e in range(self.E):
                    mats = []
                    for i in (1, 2, 3):
                        base = P_ + m + f"experts.{e}.w{i}."
                        mats.append(dequant_mxfp4(W.get(base + "weight_packed"), W.get(base + "weight_scale")))
                    ex.append(tuple(mats))
                moe["experts"] = ex
                lay["moe"] = moe
            self.layers.append(lay)
        left = W.unused()
        if left:
            raise ValueError(f"unused tensors in checkpoint: {left[:10]} ...")
        if verbose:
            print(f"[kimi_ref] kimi_k3: {self.L} layers {''.join('K' if k == 'kda' else 'M' for k in kinds)}, "
                  f"moe {[int(x) for x in self.is_moe]}, block {self.block}", flush=True)

    def act(self, g, u):
        return situ(g, u, self.beta_g, self.beta_u)

    def attn_res(self, sources, norm_w, proj_w):
        """Block AttnRes mixing (spec §2.3): softmax over sources of proj . RMSNorm(v_i), per position."""
        V = torch.stack(sources, dim=0)                                    # [n, T, D]
        s = (rms_norm(V, norm_w, self.eps) * proj_w.reshape(-1)).sum(-1)    # [n, T]
        p = torch.softmax(s, dim=0)
        return (p.unsqueeze(-1) * V).sum(0)

    def kda_layer(self, l, x):
        return kda(x, self.layers[l]["kda"], self.kda_heads, self.kda_dim, self.eps, "lower_bound",
                   self.lower_bound)

    def mla_layer(self, l, x):
        return mla(x, self.layers[l]["mla"], self.heads, self.q_lora, self.kv_lora, self.nope, self.rope,
                   self.vdim, self.eps, output_gate=self.mla_gate)

    def mlp_layer(self, l, x):
        lay = self.layers[l]
        if "dense" in lay:
            return gated_mlp(x, *lay["dense"], act=self.act)
        m = lay["moe"]
        idx, w = route(x, m["gate"], m["bias"], self.top_k, self.n_group, self.topk_group,
                       self.renorm, self.scaling)
        z = linear(x, m["down"])
        r = routed_experts(z, idx, w, m["experts"], self.act)
        if self.latent_norm:
            r = rms_norm(r, m["norm"], self.eps)
        return linear(r, m["up"]) + gated_mlp(x, *m["shared"], act=self.act)

    def forward(self, ids, capture=None):
        """Logits [T, V]; with `capture` (zero-based layer ids) also each listed layer's output
        `hidden` (step 8 of spec §2.3: the running block partial prefix + mlp_out), [T, len(capture) * D]
        concatenated in list order (the DSpark drafter's context, spec §5.2)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        hidden = self.embed[ids]
        anchors = []
        rows = {}
        for l, lay in enumerate(self.layers):
            a_in = hidden if not anchors else self.attn_res(anchors + [hidden], *lay["attn_res"])
            if l % self.block == 0:
                anchors.append(hidden)
                prefix_before = torch.zeros_like(hidden)
            else:
                prefix_before = hidden
            x = rms_norm(a_in, lay["in_norm"], self.eps)
            attn_out = self.kda_layer(l, x) if "kda" in lay else self.mla_layer(l, x)
            prefix = prefix_before + attn_out
            m_in = self.attn_res(anchors + [prefix], *lay["mlp_res"])
            hidden = prefix + self.mlp_layer(l, rms_norm(m_in, lay["post_norm"], self.eps))
            rows[l] = hidden
        mix = self.attn_res(anchors + [hidden], *self.out_res)
        logits = linear(rms_norm(mix, self.norm, self.eps), self.lm_head)
        return logits if capture is None else (logits, _captured(rows, capture, self.L))

    def greedy(self, ids, n):
        return greedy(self, ids, n)


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def _captured(rows, layer_ids, num_layers):
    """Concatenation of the captured per-layer rows in the order of layer_ids."""
    for l in layer_ids:
        if not 0 <= l < num_layers:
            raise ValueError(f"capture names layer {l}, outside 0..{num_layers - 1}")
    return torch.cat([rows[l] for l in layer_ids], dim=-1)


@torch.no_grad()
def greedy(model, ids, n):
    """n greedy tokens; re-runs the full forward each step (small sizes only)."""
    seq = [int(i) for i in ids]
    out = []
    for _ in range(n):
        nxt = int(torch.argmax(model.forward(seq)[-1]))
        seq.append(nxt)
        out.append(nxt)
    return out


def load_model(ckpt_dir, verbose=True):
    with open(os.path.join(ckpt_dir, "config.json")) as fh:
        config = json.load(fh)
    tensors = read_tensors(ckpt_dir)
    mt = config.get("model_type")
    if mt == "kimi_linear":
        return KimiLinearRef(config, tensors, verbose)
    if mt == "kimi_k3":
        return KimiK3Ref(config, tensors, verbose)
    raise ValueError(f"{ckpt_dir}/config.json: unsupported model_type {mt!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--new", type=int, default=8)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    m = load_model(args.ckpt)
    ids = [int(x) for x in args.ids.split(",")]
    logits = m.forward(ids)
    print(json.dumps({"prompt_ids": ids, "last_logits_argmax": int(logits[-1].argmax()),
                      "generated_ids": m.greedy(ids, args.new)}))


if __name__ == "__main__":
    sys.exit(main())
