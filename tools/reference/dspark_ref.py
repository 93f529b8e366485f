"""Plain fp32 PyTorch reference of the K3-native DSpark block drafter (specs/kimi-k3.md §5.2),
written from the spec for clarity, not speed: attention uses the expanded form (kv_b applied to
every latent, explicit keys and values), RoPE rotates interleaved pairs with angles in float64.

Algorithm (spec §5.2 steps 1-4):
  1. context: per committed target position p, the target's hidden rows after the config's
     target_layer_ids, concatenated -> context_proj -> RMSNorm(context_norm) = c_p; per layer i,
     [lat | pe] = kv_a_i(c_p); the layer's cache gets RMSNorm(kv_a_layernorm_i, lat) and RoPE(pe, p).
  2. propose: the target's embeddings of [pending, mask x (D-1)] at positions L..L+D-1 (L = cached
     positions); per layer x += MLA(RMSNorm(x)); x += MLP(RMSNorm(x)) where MLA's queries see
     every cached row and every query row (no mask; the query rows' own kv_a gives their keys),
     scale (nope+rope)^-0.5 * mscale(factor, mscale_all_dim)^2, YaRN RoPE on q_pe and k_pe, and
     the MLP is down(silu(gate) * up); final RMSNorm -> the target's lm_head.
  3. markov head row by row: u_j = markov_w1[prev_j] (prev_0 = pending, prev_j = token_{j-1});
     token_j = argmax(logits_j + markov_w2 @ u_j); confidence_j = proj([h_j ; u_j]) + bias with
     h_j the FINAL-NORMED row (the one the lm_head reads). The spec says only "hidden_j"; DeepSpec's
     training code (deepspec/modeling/dspark: the backbone returns norm(hidden) and the same tensor
     feeds compute_logits and the confidence head) is why we read it as the normed row.
  4. query rows are never cached.

API: DSparkRef(config, tensors, target) or load(dspark_dir, target) with `target` a kimi_ref
model (its `embed`, `lm_head` and forward(ids, capture=...) are used).
"""

import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from kimi_ref import linear, read_tensors, rms_norm, silu, widen  # noqa: E402


def yarn_mscale(factor, m):
    """DeepSeek's YaRN magnitude: 0.1 * m * ln(factor) + 1, and 1 when factor <= 1."""
    return 1.0 if factor <= 1.0 else 0.1 * m * math.log(factor) + 1.0


def yarn_inv_freq(rope_dim, theta, factor, original_max, beta_fast, beta_slow):
    """Inverse frequency per rotated pair, as DeepSeek-V3's YaRN rotary embedding computes it
    (float64 here). Without scaling (factor <= 1) it is plain theta^(-2i/d)."""
    i = torch.arange(0, rope_dim, 2, dtype=torch.float64)
    extrapolated = 1.0 / theta ** (i / rope_dim)
    if factor <= 1.0 or not original_max:
        return extrapolated
    interpolated = extrapolated / factor

    def correction_dim(rotations):
        return rope_dim * math.log(original_max / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rope_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rope_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1.0 - ramp                       # 1: keep the original (extrapolated) frequency
    return interpolated * (1 - keep) + extrapolated * keep


class DSparkRef:
    def __init__(self, config, tensors, target, verbose=True):
        c = config
        if "K3DSparkModel" not in c.get("architectures", []):
            raise ValueError(f"config.architectures {c.get('architectures')} does not name K3DSparkModel")
        self.c = c
        self.H = c["hidden_size"]
        self.n_layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.q_lora, self.kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
        self.nope, self.rope_dim, self.vdim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.eps = c.get("rms_norm_eps", 1e-5)
        self.V = c["vocab_size"]
        self.r = c["markov_rank"]
        self.mask = c["mask_token_id"]
        self.D = c["num_draft_tokens"]
        self.layer_ids = list(c["target_layer_ids"])
        assert c.get("hidden_act", "silu") == "silu"
        assert c.get("markov_head_type", "vanilla") == "vanilla"
        rs = c.get("rope_scaling") or {}
        theta = c["rope_theta"]
        if rs:
            assert rs.get("type", rs.get("rope_type")) == "yarn", rs
            factor = rs["factor"]
            mscale, mscale_all = rs.get("mscale", 1.0), rs.get("mscale_all_dim", 0.0)
            self.inv_freq = yarn_inv_freq(self.rope_dim, theta, factor, rs["original_max_position_embeddings"],
                                          rs.get("beta_fast", 32.0), rs.get("beta_slow", 1.0))
        else:
            factor, mscale, mscale_all = 1.0, 1.0, 0.0
            self.inv_freq = yarn_inv_freq(self.rope_dim, theta, 1.0, 0, 0, 0)
        self.rope_magnitude = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
        self.scale = (self.nope + self.rope_dim) ** -0.5
        if mscale_all:
            self.scale *= yarn_mscale(factor, mscale_all) ** 2

        # Target parts the drafter uses: K3's embedding and lm_head.
        self.target = target
        assert target.embed.shape == (self.V, self.H), (target.embed.shape, self.V, self.H)
        assert max(self.layer_ids) < target.L

        used = set()

        def f(name):
            used.add(name)
            return widen(tensors[name])

        self.context_proj = f("context_proj.weight")
        assert self.context_proj.shape == (self.H, len(self.layer_ids) * self.H), self.context_proj.shape
        self.context_norm = f("context_norm.weight")
        self.layers = []
        for i in range(self.n_layers):
            p = f"layers.{i}."
            a = p + "self_attn."
            self.layers.append({
                "in_norm": f(p + "input_layernorm.weight"), "post_norm": f(p + "post_attention_layernorm.weight"),
                "q_a": f(a + "q_a_proj.weight"), "q_a_norm": f(a + "q_a_layernorm.weight"), "q_b": f(a + "q_b_proj.weight"),
                "kv_a": f(a + "kv_a_proj_with_mqa.weight"), "kv_a_norm": f(a + "kv_a_layernorm.weight"),
                "kv_b": f(a + "kv_b_proj.weight"), "o": f(a + "o_proj.weight"),
                "gate": f(p + "mlp.gate_proj.weight"), "up": f(p + "mlp.up_proj.weight"),
                "down": f(p + "mlp.down_proj.weight")})
        self.final_norm = f("final_norm.weight")
        self.markov_w1 = f("markov_head.markov_w1.weight")                 # [V, r]
        self.markov_w2 = f("markov_head.markov_w2.weight")                 # [V, r]
        assert self.markov_w1.shape == (self.V, self.r) and self.markov_w2.shape == (self.V, self.r)
        self.conf_w = f("confidence_head.proj.weight")                     # [1, H + r]
        self.conf_b = f("confidence_head.proj.bias")                       # [1]
        assert self.conf_w.shape == (1, self.H + self.r), self.conf_w.shape
        f("embed_tokens.weight")                                           # redundant, never used
        left = sorted(set(tensors) - used)
        if left:
            raise ValueError(f"tensors outside the DSpark roster: {left[:10]}")
        if verbose:
            print(f"[dspark_ref] {self.n_layers} layers, {self.heads} heads, context from target layers "
                  f"{self.layer_ids}, D={self.D}, scale {self.scale:.6g}, rope magnitude {self.rope_magnitude:.6g}",
                  flush=True)

    # -- pieces (also used by check_dspark_vs_transformers.py) --

    def rope(self, x, positions):
        """Rotates interleaved pairs (x[2i], x[2i+1]) by positions[t] * inv_freq[i].
        x [T, ..., rope_dim]; positions: T integers."""
        pos = torch.as_tensor(positions, dtype=torch.float64)
        angle = pos[:, None] * self.inv_freq[None, :]                      # [T, rope/2], float64
        cos = (torch.cos(angle) * self.rope_magnitude).to(torch.float32)
        sin = (torch.sin(angle) * self.rope_magnitude).to(torch.float32)
        shape = [x.shape[0]] + [1] * (x.dim() - 2) + [self.rope_dim // 2]
        cos, sin = cos.reshape(shape), sin.reshape(shape)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1).flatten(-2)

    def context(self, ctx_rows):
        """c = RMSNorm(context_proj(rows)) for [T, n_ids * H] target rows."""
        return rms_norm(linear(ctx_rows, self.context_proj), self.context_norm, self.eps)

    def layer_kv(self, i, x, positions):
        """Compact cache entries of layer i for inputs x [T, H]: (normalised latent [T, kv_lora],
        rotated k_pe [T, rope])."""
        lay = self.layers[i]
        c = linear(x, lay["kv_a"])
        lat = rms_norm(c[:, :self.kv_lora], lay["kv_a_norm"], self.eps)
        return lat, self.rope(c[:, self.kv_lora:], positions)

    def attention(self, i, x, positions, ctx_lat, ctx_kpe):
        """MLA of layer i for query rows x [D, H] (already input-normed) at `positions`: keys and
        values are the cached rows followed by the query rows' own, all visible to every query."""
        lay = self.layers[i]
        D, nh = x.shape[0], self.heads
        q = linear(rms_norm(linear(x, lay["q_a"]), lay["q_a_norm"], self.eps), lay["q_b"]).view(D, nh, -1)
        q_nope, q_pe = q[..., :self.nope], self.rope(q[..., self.nope:], positions)
        lat_q, kpe_q = self.layer_kv(i, x, positions)
        lat = torch.cat([ctx_lat, lat_q], dim=0)                           # [S, kv_lora]
        kpe = torch.cat([ctx_kpe, kpe_q], dim=0)                           # [S, rope]
        S = lat.shape[0]
        kv = linear(lat, lay["kv_b"]).view(S, nh, self.nope + self.vdim)
        k = torch.cat([kv[..., :self.nope], kpe.unsqueeze(1).expand(S, nh, self.rope_dim)], dim=-1)
        v = kv[..., self.nope:]
        qf = torch.cat([q_nope, q_pe], dim=-1)
        scores = torch.einsum("thd,shd->hts", qf, k) * self.scale          # no mask at all
        probs = torch.softmax(scores, dim=-1)
        a = torch.einsum("hts,shd->thd", probs, v).reshape(D, nh * self.vdim)
        return linear(a, lay["o"])

    def mlp(self, i, x):
        lay = self.layers[i]
        return linear(silu(linear(x, lay["gate"])) * linear(x, lay["up"]), lay["down"])

    # -- the drafter --

    def cache(self, ctx_rows):
        """Per layer (latent, k_pe) for target rows at positions 0..T-1."""
        T = ctx_rows.shape[0]
        if T == 0:
            empty = (torch.zeros(0, self.kv_lora), torch.zeros(0, self.rope_dim))
            return [empty] * self.n_layers
        c = self.context(ctx_rows)
        return [self.layer_kv(i, c, list(range(T))) for i in range(self.n_layers)]

    @torch.no_grad()
    def propose(self, ctx_rows, pending):
        """ctx_rows [L, n_ids * H] (target rows of committed positions 0..L-1), pending token at
        position L. Returns dict: logits [D, V] before the markov bias, tokens [D], confidence [D]
        (raw), hidden [D, H] final-normed, adjusted [D, V] logits + markov bias."""
        L = ctx_rows.shape[0]
        cache = self.cache(ctx_rows)
        positions = list(range(L, L + self.D))
        ids = torch.tensor([pending] + [self.mask] * (self.D - 1), dtype=torch.long)
        x = self.target.embed[ids]
        for i in range(self.n_layers):
            lay = self.layers[i]
            x = x + self.attention(i, rms_norm(x, lay["in_norm"], self.eps), positions, *cache[i])
            x = x + self.mlp(i, rms_norm(x, lay["post_norm"], self.eps))
        h = rms_norm(x, self.final_norm, self.eps)
        logits = linear(h, self.target.lm_head)
        tokens, conf, adjusted = [], [], []
        prev = int(pending)
        for j in range(self.D):
            u = self.markov_w1[prev]                                       # [r]
            row = logits[j] + self.markov_w2 @ u                           # [V]
            tok = int(torch.argmax(row))
            c = float((self.conf_w[0] * torch.cat([h[j], u])).sum() + self.conf_b[0])
            tokens.append(tok)
            conf.append(c)
            adjusted.append(row)
            prev = tok
        return {"logits": logits, "tokens": tokens, "confidence": conf, "hidden": h,
                "adjusted": torch.stack(adjusted)}


def load(dspark_dir, target, verbose=True):
    with open(os.path.join(dspark_dir, "config.json")) as fh:
        config = json.load(fh)
    return DSparkRef(config, read_tensors(dspark_dir), target, verbose)
