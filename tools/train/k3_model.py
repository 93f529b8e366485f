"""Trainable PyTorch form of the Kimi K3 architecture (specs/kimi-k3.md §2), for the default model
pair: the same math as tools/reference/kimi_ref.py (which the engine matches), but batched and
parallel: chunked KDA (the WY-style form of spec §2.4, exact in fp32), padded-batch latent MoE, and
fake MXFP4 quantisation of the routed experts with a straight-through estimator for
quantisation-aware training. Parameters are keyed by their checkpoint names (without the
`language_model.` prefix); experts are stacked per layer and split only on export.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# MXFP4 (compressed-tensors mxfp4-pack-quantized, spec §3.3)
# ---------------------------------------------------------------------------------------------

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def mxfp4_encode(w):
    """w [..., rows, cols] float -> (codes int64 [..., rows, cols], exponent int64 [..., rows, cols/32]).
    Per 32-column block: the smallest power of two 2^e with max|w| / 2^e <= 6 (e rounded up), then
    each value rounded to the nearest E2M1 magnitude (ties toward the smaller one), sign in bit 3."""
    w = w.detach().to(torch.float32)
    *lead, rows, cols = w.shape
    assert cols % 32 == 0, w.shape
    blocks = w.reshape(*lead, rows, cols // 32, 32)
    amax = blocks.abs().amax(-1)
    mant, ex = torch.frexp(amax / 6.0)                      # amax/6 = mant * 2^ex, mant in [0.5, 1)
    e = ex.to(torch.int64) - (mant == 0.5).to(torch.int64)  # ceil(log2(amax / 6)) exactly
    e = torch.where(amax > 0, e, torch.full_like(e, -20)).clamp(-126, 127)
    y = blocks / torch.ldexp(torch.ones_like(amax), e).unsqueeze(-1)
    mids = torch.tensor(_MIDPOINTS, dtype=torch.float32, device=w.device)
    mag = torch.bucketize(y.abs().contiguous(), mids, right=False)
    codes = mag | ((y < 0) & (mag > 0)).to(torch.int64) << 3
    return codes.reshape(*lead, rows, cols), e


def mxfp4_decode(codes, e):
    table = torch.tensor(E2M1_MAGNITUDES + tuple(-m for m in E2M1_MAGNITUDES), dtype=torch.float32,
                         device=codes.device)
    vals = table[codes]
    *lead, rows, cols = vals.shape
    scale = torch.ldexp(torch.ones(e.shape, dtype=torch.float32, device=e.device), e)
    return (vals.reshape(*lead, rows, cols // 32, 32) * scale.unsqueeze(-1)).reshape(*lead, rows, cols)


def mxfp4_fake_quant(w):
    return mxfp4_decode(*mxfp4_encode(w))


def mxfp4_pack(w):
    """[..., rows, cols] -> (weight_packed uint8 [..., rows, cols/2], weight_scale uint8 [..., rows, cols/32])."""
    codes, e = mxfp4_encode(w)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    return packed, (e + 127).to(torch.uint8)


def mxfp4_unpack(packed, scale):
    p = packed.to(torch.int64)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(*p.shape[:-1], -1)
    return mxfp4_decode(codes, scale.to(torch.int64) - 127)


# ---------------------------------------------------------------------------------------------
# Primitives (fp32)
# ---------------------------------------------------------------------------------------------


def rms_norm(x, w, eps):
    x = x.float()
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def l2norm(x, eps=1e-6):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def situ(g, u, beta_g, beta_u):
    g, u = g.float(), u.float()
    return (beta_g * torch.tanh(g / beta_g) * torch.sigmoid(g)) * (beta_u * torch.tanh(u / beta_u))


def causal_conv_silu(x, w):
    """x [B, T, C], w [C, 1, K] (oldest tap first), zero history; then SiLU."""
    K = w.shape[-1]
    y = F.conv1d(F.pad(x.float().transpose(1, 2), (K - 1, 0)), w.float(), groups=w.shape[0])
    return F.silu(y.transpose(1, 2))


def chunk_kda(q, k, v, g, beta, chunk=16):
    """Kimi delta rule over whole sequences from zero state, chunk-parallel and exact in fp32.
    q, k [B, T, H, K] (q scaled, both l2-normalised), v [B, T, H, V], g [B, T, H, K] log-decay
    (<= 0), beta [B, T, H]. Per position: S <- Diag(exp g) S; S <- S + beta k (v - S^T k)^T;
    o = S^T q. Returns o [B, T, H, V]. Uses only exponentials of non-positive differences."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    pad = (-T) % chunk
    tr = lambda x: x.float().transpose(1, 2)
    q, k, v, g, beta = tr(q), tr(k), tr(v), tr(g), beta.float().transpose(1, 2)
    if pad:
        q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
        beta = F.pad(beta, (0, pad))
    N = (T + pad) // chunk
    C = chunk
    q, k, g = (x.reshape(B, H, N, C, K) for x in (q, k, g))
    v = v.reshape(B, H, N, C, V)
    beta = beta.reshape(B, H, N, C)
    G = g.cumsum(-2)                                                       # [B,H,N,C,K]
    incl = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device))
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device), -1)
    diff = G.unsqueeze(-2) - G.unsqueeze(-3)                               # [.., t, i, K] = G_t - G_i
    E = torch.exp(diff.masked_fill(~incl[:, :, None], float("-inf")))
    A_kk = torch.einsum("bhntk,bhnsk,bhntsk->bhnts", k, k, E).masked_fill(~strict, 0.0)
    A_qk = torch.einsum("bhntk,bhnsk,bhntsk->bhnts", q, k, E).masked_fill(~incl, 0.0)
    gamma = torch.exp(G)
    eye = torch.eye(C, dtype=torch.float32, device=k.device)
    Tm = eye + beta.unsqueeze(-1) * A_kk
    U = torch.linalg.solve_triangular(Tm, beta.unsqueeze(-1) * v, upper=False, unitriangular=True)
    Kc = torch.linalg.solve_triangular(Tm, beta.unsqueeze(-1) * (gamma * k), upper=False, unitriangular=True)
    Qg = gamma * q
    Kend = k * torch.exp(G[..., -1:, :] - G)
    gend = gamma[..., -1, :]                                               # [B,H,N,K]
    S = torch.zeros(B, H, K, V, dtype=torch.float32, device=k.device)
    outs = []
    for n in range(N):
        W = U[:, :, n] - Kc[:, :, n] @ S                                   # [B,H,C,V]
        outs.append(Qg[:, :, n] @ S + A_qk[:, :, n] @ W)
        S = gend[:, :, n].unsqueeze(-1) * S + Kend[:, :, n].transpose(-1, -2) @ W
    o = torch.stack(outs, dim=2).reshape(B, H, N * C, V)[:, :, :T]
    return o.transpose(1, 2)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


class K3(nn.Module):
    def __init__(self, root_config):
        super().__init__()
        c = root_config["text_config"]
        self.c = c
        self.D = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.V = c["vocab_size"]
        self.eps = c["rms_norm_eps"]
        self.beta_g, self.beta_u = c["activation_situ_beta"], c["activation_situ_linear_beta"]
        lac = c["linear_attn_config"]
        self.kda_heads, self.kda_dim = lac["num_heads"], lac["head_dim"]
        self.conv_k = lac["short_conv_kernel_size"]
        self.lower_bound = lac["gate_lower_bound"]
        kinds = [None] * self.L
        for i in lac["kda_layers"]:
            kinds[i - 1] = "kda"
        for i in lac["full_attn_layers"]:
            kinds[i - 1] = "mla"
        assert None not in kinds
        self.kinds = kinds
        self.block = c["attn_res_block_size"]
        self.heads = c["num_attention_heads"]
        self.q_lora, self.kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
        self.nope, self.rope, self.vdim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.E = c["num_experts"]
        self.top_k = c["num_experts_per_token"]
        assert c.get("num_expert_group", 1) == 1 and c.get("topk_group", 1) == 1
        self.scaling = c.get("routed_scaling_factor", 1.0)
        self.moe_inter = c["moe_intermediate_size"]
        self.latent = c["routed_expert_hidden_size"]
        self.shared_inter = c["moe_intermediate_size"] * c["num_shared_experts"]
        fk = c.get("first_k_dense_replace", 1)
        self.is_moe = [l >= fk and l % c.get("moe_layer_freq", 1) == 0 for l in range(self.L)]
        self.qat = False            # forward through fake-MXFP4 experts (straight-through gradient)
        self.names = {}             # checkpoint name -> parameter attribute
        D, P = self.D, self.kda_heads * self.kda_dim
        std = 0.02
        out_std = 0.02 / math.sqrt(2 * self.L)
        g = torch.Generator().manual_seed(1234)

        def add(name, shape, init, value=0.0):
            if init == "normal":
                t = torch.randn(*shape, generator=g) * value
            elif init == "const":
                t = torch.full(shape, float(value))
            else:
                t = init
            attr = name.replace(".", "__")
            self.register_parameter(attr, nn.Parameter(t.float()))
            self.names[name] = attr

        add("model.embed_tokens.weight", (self.V, D), "normal", 1.0)
        add("lm_head.weight", (self.V, D), "normal", std)
        add("model.norm.weight", (D,), "const", 1.0)
        add("model.output_attn_res_norm.weight", (D,), "const", 1.0)
        add("model.output_attn_res_proj.weight", (1, D), "const", 0.0)
        for l in range(self.L):
            p = f"model.layers.{l}."
            for n in ("input_layernorm", "self_attention_res_norm", "post_attention_layernorm", "mlp_res_norm"):
                add(p + n + ".weight", (D,), "const", 1.0)
            add(p + "self_attention_res_proj.weight", (1, D), "const", 0.0)
            add(p + "mlp_res_proj.weight", (1, D), "const", 0.0)
            a = p + "self_attn."
            if kinds[l] == "kda":
                H, Kd = self.kda_heads, self.kda_dim
                for n in ("q_proj", "k_proj", "v_proj", "g_proj"):
                    add(a + n + ".weight", (P, D), "normal", std)
                add(a + "o_proj.weight", (D, P), "normal", out_std)
                add(a + "b_proj.weight", (H, D), "normal", std)
                add(a + "f_a_proj.weight", (Kd, D), "normal", std)
                add(a + "f_b_proj.weight", (P, Kd), "normal", std)
                for n in "qkv":
                    add(a + f"{n}_conv1d.weight", (P, 1, self.conv_k), (torch.rand(P, 1, self.conv_k, generator=g) - 0.5))
                add(a + "o_norm.weight", (self.vdim_kda,), "const", 1.0)
                # decay rate sigma(r) log-uniform in [1e-3, 1e-1] at start: g = -5 sigma(r) in [-0.5, -0.005]
                s = torch.exp(torch.rand(P, generator=g) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
                add(a + "dt_bias", (P,), torch.log(s / (1 - s)))
                add(a + "A_log", (H,), "const", 0.0)   # exported padded with zeros to head_dim entries
            else:
                H = self.heads
                add(a + "q_a_proj.weight", (self.q_lora, D), "normal", std)
                add(a + "q_a_layernorm.weight", (self.q_lora,), "const", 1.0)
                add(a + "q_b_proj.weight", (H * (self.nope + self.rope), self.q_lora), "normal", std)
                add(a + "kv_a_proj_with_mqa.weight", (self.kv_lora + self.rope, D), "normal", std)
                add(a + "kv_a_layernorm.weight", (self.kv_lora,), "const", 1.0)
                add(a + "kv_b_proj.weight", (H * (self.nope + self.vdim), self.kv_lora), "normal", std)
                add(a + "g_proj.weight", (H * self.vdim, D), "normal", std)
                add(a + "o_proj.weight", (D, H * self.vdim), "normal", out_std)
            if not self.is_moe[l]:
                I = c["intermediate_size"]
                add(p + "mlp.gate_proj.weight", (I, D), "normal", std)
                add(p + "mlp.up_proj.weight", (I, D), "normal", std)
                add(p + "mlp.down_proj.weight", (D, I), "normal", out_std)
            else:
                m = p + "block_sparse_moe."
                add(m + "gate.weight", (self.E, D), "normal", std)
                self.register_buffer(f"bias_{l}", torch.zeros(self.E))
                add(m + "routed_expert_down_proj.weight", (self.latent, D), "normal", std)
                add(m + "routed_expert_up_proj.weight", (D, self.latent), "normal", out_std)
                add(m + "routed_expert_norm.weight", (self.latent,), "const", 1.0)
                add(m + "shared_experts.gate_proj.weight", (self.shared_inter, D), "normal", std)
                add(m + "shared_experts.up_proj.weight", (self.shared_inter, D), "normal", std)
                add(m + "shared_experts.down_proj.weight", (D, self.shared_inter), "normal", out_std)
                # stacked experts: w1 (gate), w3 (up) [E, I, latent]; w2 (down) [E, latent, I]
                add(m + "experts.w1", (self.E, self.moe_inter, self.latent), "normal", std * 2)
                add(m + "experts.w3", (self.E, self.moe_inter, self.latent), "normal", std * 2)
                add(m + "experts.w2", (self.E, self.latent, self.moe_inter), "normal", std * 2)
        self.load_counts = {}       # layer -> expert token counts of the last forward (for bias balancing)

    @property
    def vdim_kda(self):
        return self.kda_dim

    def w(self, name):
        return getattr(self, self.names[name])

    # -- sub-layers ---------------------------------------------------------------------------
    def attn_res(self, sources, norm_name, proj_name):
        Vs = torch.stack(sources, dim=0)
        s = (rms_norm(Vs, self.w(norm_name), self.eps) * self.w(proj_name).reshape(-1)).sum(-1)
        p = torch.softmax(s, dim=0)
        return (p.unsqueeze(-1) * Vs).sum(0)

    def kda(self, l, x):
        a = f"model.layers.{l}.self_attn."
        w = lambda n: self.w(a + n)
        B, T, _ = x.shape
        H, K = self.kda_heads, self.kda_dim
        q = causal_conv_silu(F.linear(x, w("q_proj.weight")), w("q_conv1d.weight"))
        k = causal_conv_silu(F.linear(x, w("k_proj.weight")), w("k_conv1d.weight"))
        v = causal_conv_silu(F.linear(x, w("v_proj.weight")), w("v_conv1d.weight"))
        q = l2norm(q.view(B, T, H, K)) * (1.0 / math.sqrt(K))
        k = l2norm(k.view(B, T, H, K))
        v = v.view(B, T, H, K)
        r = (F.linear(F.linear(x, w("f_a_proj.weight")), w("f_b_proj.weight")).float() + w("dt_bias")).view(B, T, H, K)
        gl = self.lower_bound * torch.sigmoid(torch.exp(w("A_log")).view(1, 1, H, 1) * r)
        beta = torch.sigmoid(F.linear(x, w("b_proj.weight")).float())
        with torch.autocast(device_type=x.device.type, enabled=False):
            o = chunk_kda(q, k, v, gl, beta)
        o = rms_norm(o, w("o_norm.weight"), self.eps)
        o = o * torch.sigmoid(F.linear(x, w("g_proj.weight")).float().view(B, T, H, K))
        return F.linear(o.reshape(B, T, H * K), w("o_proj.weight"))

    def mla(self, l, x):
        a = f"model.layers.{l}.self_attn."
        w = lambda n: self.w(a + n)
        B, T, _ = x.shape
        H, nope, rope, vd = self.heads, self.nope, self.rope, self.vdim
        q = F.linear(rms_norm(F.linear(x, w("q_a_proj.weight")), w("q_a_layernorm.weight"), self.eps),
                     w("q_b_proj.weight")).view(B, T, H, nope + rope)
        c = F.linear(x, w("kv_a_proj_with_mqa.weight"))
        lat = rms_norm(c[..., :self.kv_lora], w("kv_a_layernorm.weight"), self.eps)
        k_pe = c[..., self.kv_lora:]
        kv = F.linear(lat, w("kv_b_proj.weight")).view(B, T, H, nope + vd)
        k = torch.cat([kv[..., :nope], k_pe.unsqueeze(2).expand(B, T, H, rope).to(kv.dtype)], dim=-1)
        v = kv[..., nope:]
        scores = torch.einsum("bthd,bshd->bhts", q.float(), k.float()) * (nope + rope) ** -0.5
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        att = torch.einsum("bhts,bshd->bthd", probs, v.float()).reshape(B, T, H * vd)
        att = att * torch.sigmoid(F.linear(x, w("g_proj.weight")).float())
        return F.linear(att, w("o_proj.weight"))

    def expert_weights(self, l):
        m = f"model.layers.{l}.block_sparse_moe.experts."
        ws = [self.w(m + n) for n in ("w1", "w2", "w3")]
        if self.qat:
            ws = [w + (mxfp4_fake_quant(w) - w).detach() for w in ws]
        return ws

    def moe(self, l, x):
        m = f"model.layers.{l}.block_sparse_moe."
        shp = x.shape
        x = x.reshape(-1, shp[-1])
        N = x.shape[0]
        scores = torch.sigmoid(F.linear(x.float(), self.w(m + "gate.weight").float()))
        choice = scores + getattr(self, f"bias_{l}")
        idx = torch.topk(choice.detach(), k=self.top_k, dim=-1)[1]
        wts = scores.gather(1, idx)
        wts = wts / (wts.sum(-1, keepdim=True) + 1e-20) * self.scaling
        z = F.linear(x, self.w(m + "routed_expert_down_proj.weight"))
        w1, w2, w3 = self.expert_weights(l)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        e_sorted = flat[order]
        counts = torch.bincount(flat, minlength=self.E)
        self.load_counts[l] = counts.detach()
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.arange(flat.numel(), device=x.device) - starts[e_sorted]
        cap = int(counts.max())
        tok = order // self.top_k
        xp = torch.zeros(self.E, cap, self.latent, dtype=z.dtype, device=x.device)
        xp = xp.index_put((e_sorted, pos), z[tok])
        h = situ(torch.bmm(xp, w1.transpose(1, 2).to(xp.dtype)), torch.bmm(xp, w3.transpose(1, 2).to(xp.dtype)),
                 self.beta_g, self.beta_u)
        y = torch.bmm(h.to(xp.dtype), w2.transpose(1, 2).to(xp.dtype))   # [E, cap, latent]
        ys = y[e_sorted, pos].float() * wts.reshape(-1)[order].unsqueeze(-1)
        r = torch.zeros(N, self.latent, dtype=torch.float32, device=x.device).index_add(0, tok, ys)
        r = rms_norm(r, self.w(m + "routed_expert_norm.weight"), self.eps)
        routed = F.linear(r, self.w(m + "routed_expert_up_proj.weight"))
        sh = m + "shared_experts."
        shared = F.linear(situ(F.linear(x, self.w(sh + "gate_proj.weight")), F.linear(x, self.w(sh + "up_proj.weight")),
                               self.beta_g, self.beta_u), self.w(sh + "down_proj.weight"))
        return (routed.float() + shared.float()).reshape(shp)

    def mlp(self, l, x):
        if self.is_moe[l]:
            return self.moe(l, x)
        p = f"model.layers.{l}.mlp."
        return F.linear(situ(F.linear(x, self.w(p + "gate_proj.weight")), F.linear(x, self.w(p + "up_proj.weight")),
                             self.beta_g, self.beta_u), self.w(p + "down_proj.weight")).float()

    def forward(self, ids, capture=None):
        """ids [B, T] -> logits [B, T, V] (fp32). With capture (zero-based layer ids) -> (logits,
        rows [B, T, len(capture)*H] fp32): each listed layer's output `hidden` (the AttnRes partial
        after spec §2.3 step 8, what kimi_ref captures and DSpark reads)."""
        hidden = self.w("model.embed_tokens.weight")[ids].float()
        anchors = []
        rows = {}
        for l in range(self.L):
            p = f"model.layers.{l}."
            a_in = hidden if not anchors else self.attn_res(anchors + [hidden], p + "self_attention_res_norm.weight",
                                                            p + "self_attention_res_proj.weight")
            if l % self.block == 0:
                anchors.append(hidden)
                prefix_before = torch.zeros_like(hidden)
            else:
                prefix_before = hidden
            x = rms_norm(a_in, self.w(p + "input_layernorm.weight"), self.eps)
            attn_out = self.kda(l, x) if self.kinds[l] == "kda" else self.mla(l, x)
            prefix = prefix_before + attn_out.float()
            m_in = self.attn_res(anchors + [prefix], p + "mlp_res_norm.weight", p + "mlp_res_proj.weight")
            hidden = prefix + self.mlp(l, rms_norm(m_in, self.w(p + "post_attention_layernorm.weight"), self.eps))
            if capture is not None and l in capture:
                rows[l] = hidden
        mix = self.attn_res(anchors + [hidden], "model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight")
        logits = F.linear(rms_norm(mix, self.w("model.norm.weight"), self.eps), self.w("lm_head.weight")).float()
        if capture is None:
            return logits
        return logits, torch.cat([rows[l].float() for l in capture], dim=-1)

    @torch.no_grad()
    def update_router_bias(self, rate):
        """Auxiliary-loss-free balancing (noaux_tc): nudge each expert's correction bias toward the
        mean load, by sign."""
        for l, counts in self.load_counts.items():
            b = getattr(self, f"bias_{l}")
            load = counts.float()
            b += rate * torch.sign(load.mean() - load)

    # -- checkpoint I/O ------------------------------------------------------------------------
    @torch.no_grad()
    def export_tensors(self, roster):
        """Checkpoint tensors (names with the `language_model.` prefix) in the dtypes and shapes the
        roster lists: BF16 / F32 as given, MXFP4 (U8 packed + scale) for routed experts."""
        want = {}
        for items in roster["files"].values():
            for name, dtype, shape in items:
                want[name] = (dtype, shape)
        out = {}
        pre = "language_model."
        for name, attr in self.names.items():
            t = getattr(self, attr).detach().float()
            if name.endswith(("experts.w1", "experts.w2", "experts.w3")):
                base, wi = name.rsplit(".", 1)
                packed, scale = (x.cpu() for x in mxfp4_pack(t))      # all experts of the layer at once
                for e in range(t.shape[0]):
                    out[f"{pre}{base}.{e}.{wi}.weight_packed"] = packed[e]
                    out[f"{pre}{base}.{e}.{wi}.weight_scale"] = scale[e]
                continue
            t = t.cpu()
            if name.endswith("A_log"):
                dtype, shape = want[pre + name]
                t = torch.cat([t, torch.zeros(shape[0] - t.numel())])
            out[pre + name] = t
        for l in range(self.L):
            if self.is_moe[l]:
                out[f"{pre}model.layers.{l}.block_sparse_moe.gate.e_score_correction_bias"] = getattr(self, f"bias_{l}").float().cpu()
        conv = {"BF16": torch.bfloat16, "F32": torch.float32, "U8": torch.uint8}
        missing = sorted(set(want) - set(out))
        extra = sorted(set(out) - set(want))
        assert not missing and not extra, f"roster mismatch: missing {missing[:5]} extra {extra[:5]}"
        for name, (dtype, shape) in want.items():
            t = out[name].to(conv[dtype])
            assert list(t.shape) == list(shape), (name, list(t.shape), shape)
            out[name] = t.contiguous()
        return out

    @torch.no_grad()
    def load_exported(self, tensors):
        """Inverse of export_tensors (MXFP4 experts dequantised exactly, BF16 widened)."""
        pre = "language_model."
        for name, attr in self.names.items():
            p = getattr(self, attr)
            if name.endswith(("experts.w1", "experts.w2", "experts.w3")):
                base, wi = name.rsplit(".", 1)
                packed = torch.stack([tensors[f"{pre}{base}.{e}.{wi}.weight_packed"] for e in range(p.shape[0])])
                scale = torch.stack([tensors[f"{pre}{base}.{e}.{wi}.weight_scale"] for e in range(p.shape[0])])
                p.copy_(mxfp4_unpack(packed.to(p.device), scale.to(p.device)))
                continue
            t = tensors[pre + name].float()
            if name.endswith("A_log"):
                t = t[:p.numel()]
            p.copy_(t.reshape(p.shape).to(p.device))
        for l in range(self.L):
            if self.is_moe[l]:
                getattr(self, f"bias_{l}").copy_(tensors[f"{pre}model.layers.{l}.block_sparse_moe.gate.e_score_correction_bias"].float())
