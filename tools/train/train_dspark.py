"""Trains a small K3-native DSpark block drafter (specs/kimi-k3.md §5.2) against the default target
(models/default/target), exports it in the checkpoint format tools/reference/dspark_ref.py and the
engine load (config.json `K3DSparkModel` + one BF16 model.safetensors with the DSpark roster), then
reloads the export with the plain reference and measures block acceptance on held-out text.

    train_dspark.py CORPUS_OR_DATA_DIR OUT --target models/default/target [--seconds 150]

CORPUS_OR_DATA_DIR holds train.txt.gz / val.txt.gz (tools/train/make_corpus.sh; documents split by
"\\n\\f\\n", tokenized here exactly as tok_train.py does, with tiktoken built from the target's
tiktoken.model) or train.bin / val.bin (int32 ids written by tok_train.py).

Writes OUT/models/default/dspark/{config.json, model.safetensors} and
OUT/tools/train/results/dspark_summary.json (also printed).

Training (what the engine does at inference, vectorised over many anchors per sequence):
  * the frozen target (k3_model.K3 loaded from the export, bf16 autocast on the GPU) gives, per
    position p of a training sequence, the concatenated `hidden` rows after target_layer_ids (the
    layer output of spec §2.3 step 8, what kimi_ref's capture returns) and its greedy next token g[p];
  * for an anchor L the context cache holds the rows of positions 0..L-1; the D query rows are the
    target embeddings of [token at L (pending), mask x (D-1)] at positions L..L+D-1 and see every
    context row < L and all D rows of their own block (no mask inside the block);
  * row j (0-based) is trained to give g[L+j] (the target's greedy token after position L+j; the
    token verification accepts when the corpus continuation is the greedy one) with cross-entropy on
    the lm_head logits, plus cross-entropy on the markov-adjusted logits
    logits_j + markov_w2 @ markov_w1[prev_j] (prev_0 = token at L, prev_j = g[L+j-1]: the token the
    previous row should have drafted), plus BCE of the confidence head
    proj([final-normed h_j ; markov_w1[prev_j]]) + bias against "adjusted argmax == g[L+j]".

Evaluation (the exported files through dspark_ref.py and kimi_ref.py, fp32, CPU): for anchors L of
held-out sequences, context rows from kimi_ref's capture, proposal from DSparkRef.propose(rows[:L],
tok[L]); compared with the target's greedy continuation of tok[0..L] (7 greedy steps of the
trainable target in fp32, which equals kimi_ref to ~1e-6; checked on the first step against kimi_ref's
own argmax). Acceptance at depth k = fraction of anchors whose first k drafts all equal that
continuation; accepted drafts per block = sum over k.
"""

import argparse
import contextlib
import base64
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import k3_model  # noqa: E402
import tok_train  # noqa: E402

T0 = time.time()
SUMMARY = {}


def amp(on):
    """bf16 autocast on the GPU; nothing on the CPU (torch 1.13 refuses a disabled CUDA autocast there)."""
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16) if on else contextlib.nullcontext()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


def load_encoding(tok_dir):
    """tiktoken built from the target's rank file with the engine's pattern (as tok_train.py and
    pipeline.py build it)."""
    import tiktoken
    ranks = {}
    with open(os.path.join(tok_dir, "tiktoken.model")) as fh:
        for i, line in enumerate(fh):
            b64, r = line.split()
            assert int(r) == i, (i, r)
            ranks[base64.b64decode(b64)] = int(r)
    return tiktoken.Encoding(name="sluice_default", pat_str=tok_train.K3_PAT, mergeable_ranks=ranks, special_tokens={})


def load_ids(data_dir, split, enc, max_tokens):
    """int64 numpy ids of one split: train.bin/val.bin if present, else train.txt.gz/val.txt.gz
    encoded as tok_train.py encodes them (each document + "\\n\\n", concatenated). With max_tokens,
    only as many leading documents as needed (about 3.6 chars/token) are encoded."""
    b = os.path.join(data_dir, f"{split}.bin")
    if os.path.exists(b):
        ids = np.fromfile(b, dtype=np.int32).astype(np.int64)
        return ids[:max_tokens] if max_tokens else ids
    docs = tok_train.read_docs(os.path.join(data_dir, f"{split}.txt.gz"))
    if max_tokens:
        keep, chars = [], 0
        for d in docs:
            keep.append(d)
            chars += len(d)
            if chars > max_tokens * 6:
                break
        docs = keep
    pieces = enc.encode_ordinary_batch([d + "\n\n" for d in docs], num_threads=16)
    ids = np.fromiter((i for p in pieces for i in p), dtype=np.int64)
    return ids[:max_tokens] if max_tokens else ids


# ---------------------------------------------------------------------------------------------
# target: k3_model forward with the capture of kimi_ref (layer output `hidden`, §2.3 step 8)
# ---------------------------------------------------------------------------------------------


def load_target(target_dir, dev):
    with open(os.path.join(target_dir, "config.json")) as fh:
        cfg = json.load(fh)
    m = k3_model.K3(cfg)
    from safetensors.torch import load_file
    tensors = {}
    for f in sorted(os.listdir(target_dir)):
        if f.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(target_dir, f)))
    m.load_exported(tensors)
    m = m.to(dev).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m, cfg


def target_forward(m, ids, capture):
    """(logits [B,T,V] fp32, rows [B,T,len(capture)*H] fp32) from k3_model.K3.forward's capture."""
    return m.forward(ids, capture)


@torch.no_grad()
def precompute(m, ids, T, capture, dev, bs, deadline, autocast, shuffle=False):
    """Non-overlapping T-token chunks of ids -> (tokens [N,T] long, rows [N,T,C] bf16, greedy [N,T]
    long), all on dev. Stops at the deadline (keeps what is done)."""
    n = ids.size // T
    chunks = torch.from_numpy(ids[:n * T].reshape(n, T))
    if shuffle:   # a prep cut short by the deadline still samples the whole corpus
        chunks = chunks[torch.randperm(n, generator=torch.Generator().manual_seed(11))]
    toks, rows, greedy = [], [], []
    done = 0
    for i in range(0, n, bs):
        x = chunks[i:i + bs].to(dev)
        with amp(autocast):
            logits, r = target_forward(m, x, capture)
        toks.append(x)
        rows.append(r.to(torch.bfloat16))
        greedy.append(logits.argmax(-1))
        done += x.shape[0]
        if time.time() > deadline:
            log(f"precompute: deadline reached after {done} of {n} chunks")
            break
    return torch.cat(toks), torch.cat(rows), torch.cat(greedy)


# ---------------------------------------------------------------------------------------------
# the trainable DSpark drafter (same math as dspark_ref.DSparkRef, batched)
# ---------------------------------------------------------------------------------------------


def yarn_tables(cfg):
    """(inv_freq float64 [rope/2], rope magnitude, softmax scale) exactly as dspark_ref computes them."""
    import dspark_ref
    rs = cfg.get("rope_scaling") or {}
    rope_dim, theta = cfg["qk_rope_head_dim"], cfg["rope_theta"]
    if rs:
        factor = rs["factor"]
        mscale, mscale_all = rs.get("mscale", 1.0), rs.get("mscale_all_dim", 0.0)
        inv = dspark_ref.yarn_inv_freq(rope_dim, theta, factor, rs["original_max_position_embeddings"],
                                       rs.get("beta_fast", 32.0), rs.get("beta_slow", 1.0))
    else:
        factor, mscale, mscale_all = 1.0, 1.0, 0.0
        inv = dspark_ref.yarn_inv_freq(rope_dim, theta, 1.0, 0, 0, 0)
    mag = dspark_ref.yarn_mscale(factor, mscale) / dspark_ref.yarn_mscale(factor, mscale_all)
    scale = (cfg["qk_nope_head_dim"] + rope_dim) ** -0.5
    if mscale_all:
        scale *= dspark_ref.yarn_mscale(factor, mscale_all) ** 2
    return inv, mag, scale


def rms(x, w, eps):
    x = x.float()
    return w.float() * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class DSpark(nn.Module):
    def __init__(self, cfg, embed, lm_head, max_pos=4096, seed=1):
        super().__init__()
        c = cfg
        self.c = c
        self.H, self.nl, self.nh = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
        self.q_lora, self.kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
        self.nope, self.rope_dim, self.vdim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.I, self.r, self.V = c["intermediate_size"], c["markov_rank"], c["vocab_size"]
        self.D, self.mask, self.eps = c["num_draft_tokens"], c["mask_token_id"], c["rms_norm_eps"]
        self.C = len(c["target_layer_ids"]) * self.H
        H, nh = self.H, self.nh
        self.register_buffer("embed", embed.detach().float().clone(), persistent=False)      # frozen target parts
        self.register_buffer("lm_head", lm_head.detach().float().clone(), persistent=False)
        inv, mag, scale = yarn_tables(c)
        ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", (torch.cos(ang) * mag).float(), persistent=False)        # [P, rope/2]
        self.register_buffer("sin", (torch.sin(ang) * mag).float(), persistent=False)
        self.scale = scale
        g = torch.Generator().manual_seed(seed)
        std, out_std = 0.02, 0.02 / math.sqrt(2 * self.nl)
        self.names = []

        def add(name, shape, kind, v=0.0):
            t = torch.randn(*shape, generator=g) * v if kind == "normal" else torch.full(shape, float(v))
            self.register_parameter(name.replace(".", "__"), nn.Parameter(t))
            self.names.append(name)

        add("context_proj.weight", (H, self.C), "normal", std)
        add("context_norm.weight", (H,), "const", 1.0)
        for i in range(self.nl):
            p, a = f"layers.{i}.", f"layers.{i}.self_attn."
            add(p + "input_layernorm.weight", (H,), "const", 1.0)
            add(p + "post_attention_layernorm.weight", (H,), "const", 1.0)
            add(a + "q_a_proj.weight", (self.q_lora, H), "normal", std)
            add(a + "q_a_layernorm.weight", (self.q_lora,), "const", 1.0)
            add(a + "q_b_proj.weight", (nh * (self.nope + self.rope_dim), self.q_lora), "normal", std)
            add(a + "kv_a_proj_with_mqa.weight", (self.kv_lora + self.rope_dim, H), "normal", std)
            add(a + "kv_a_layernorm.weight", (self.kv_lora,), "const", 1.0)
            add(a + "kv_b_proj.weight", (nh * (self.nope + self.vdim), self.kv_lora), "normal", std)
            add(a + "o_proj.weight", (H, nh * self.vdim), "normal", out_std)
            add(p + "mlp.gate_proj.weight", (self.I, H), "normal", std)
            add(p + "mlp.up_proj.weight", (self.I, H), "normal", std)
            add(p + "mlp.down_proj.weight", (H, self.I), "normal", out_std)
        add("final_norm.weight", (H,), "const", 1.0)
        add("markov_head.markov_w1.weight", (self.V, self.r), "normal", std)
        add("markov_head.markov_w2.weight", (self.V, self.r), "normal", std)
        add("confidence_head.proj.weight", (1, H + self.r), "normal", std)
        add("confidence_head.proj.bias", (1,), "const", 0.0)

    def w(self, name):
        return getattr(self, name.replace(".", "__"))

    def rope(self, x, pos):
        """x [..., rope] with pos broadcastable to x[..., 0]; interleaved pairs (as dspark_ref)."""
        cos, sin = self.cos[pos], self.sin[pos]                     # [..., rope/2]
        x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
        return torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1).flatten(-2)

    def kv(self, i, x, pos):
        """normalised latent and rotated k_pe of layer i for inputs x [..., H] at pos [...]."""
        c = F.linear(x, self.w(f"layers.{i}.self_attn.kv_a_proj_with_mqa.weight"))
        lat = rms(c[..., :self.kv_lora], self.w(f"layers.{i}.self_attn.kv_a_layernorm.weight"), self.eps)
        return lat, self.rope(c[..., self.kv_lora:], pos)

    def expand(self, i, lat, kpe):
        """keys [..., nh, nope+rope] and values [..., nh, v] from latents."""
        kv = F.linear(lat, self.w(f"layers.{i}.self_attn.kv_b_proj.weight"))
        kv = kv.view(*lat.shape[:-1], self.nh, self.nope + self.vdim)
        k = torch.cat([kv[..., :self.nope], kpe.unsqueeze(-2).expand(*kpe.shape[:-1], self.nh, self.rope_dim)
                       .to(kv.dtype)], dim=-1)
        return k, kv[..., self.nope:]

    def forward(self, rows, toks, anchors, prev):
        """rows [B,T,C] target rows; toks [B,T]; anchors [B,A] (1 <= L <= T-1; the block's pending
        token is toks[b, L]); prev [B,A,D] markov prev tokens. Returns (logits, adjusted, confidence
        logit, hidden): [B,A,D,V], [B,A,D,V], [B,A,D], [B,A,D,H]."""
        B, T, _ = rows.shape
        A, D, nh = anchors.shape[1], self.D, self.nh
        dev = rows.device
        ctx = rms(F.linear(rows.float(), self.w("context_proj.weight")), self.w("context_norm.weight"), self.eps)  # [B,T,H]
        ctx_pos = torch.arange(T, device=dev)
        qpos = anchors[..., None] + torch.arange(D, device=dev)                                      # [B,A,D]
        pend = toks.gather(1, anchors)                                                               # [B,A]
        ids = torch.full((B, A, D), self.mask, dtype=torch.long, device=dev)
        ids[..., 0] = pend
        x = self.embed[ids]                                                                          # [B,A,D,H]
        ctx_visible = ctx_pos[None, None, :] < anchors[..., None]                                    # [B,A,T]
        for i in range(self.nl):
            p, a = f"layers.{i}.", f"layers.{i}.self_attn."
            xn = rms(x, self.w(p + "input_layernorm.weight"), self.eps)
            q = F.linear(rms(F.linear(xn, self.w(a + "q_a_proj.weight")), self.w(a + "q_a_layernorm.weight"), self.eps),
                         self.w(a + "q_b_proj.weight")).view(B, A, D, nh, self.nope + self.rope_dim)
            q = torch.cat([q[..., :self.nope].float(), self.rope(q[..., self.nope:], qpos[..., None])], dim=-1)
            lat_c, kpe_c = self.kv(i, ctx, ctx_pos)                                                  # [B,T,*]
            k_c, v_c = self.expand(i, lat_c, kpe_c)                                                  # [B,T,nh,*]
            lat_q, kpe_q = self.kv(i, xn, qpos)                                                      # [B,A,D,*]
            k_q, v_q = self.expand(i, lat_q, kpe_q)                                                  # [B,A,D,nh,*]
            s_c = torch.einsum("badhe,bthe->bahdt", q, k_c.float()) * self.scale                    # [B,A,nh,D,T]
            s_c = s_c.masked_fill(~ctx_visible[:, :, None, None, :], float("-inf"))
            s_q = torch.einsum("badhe,bakhe->bahdk", q, k_q.float()) * self.scale                  # [B,A,nh,D,D]
            prob = torch.softmax(torch.cat([s_c, s_q], dim=-1), dim=-1)
            o = torch.einsum("bahdt,bthe->badhe", prob[..., :T].to(v_c.dtype), v_c) + \
                torch.einsum("bahdk,bakhe->badhe", prob[..., T:].to(v_q.dtype), v_q)
            x = x + F.linear(o.reshape(B, A, D, nh * self.vdim), self.w(a + "o_proj.weight")).float()
            xn = rms(x, self.w(p + "post_attention_layernorm.weight"), self.eps)
            m = F.linear(F.silu(F.linear(xn, self.w(p + "mlp.gate_proj.weight"))) * F.linear(xn, self.w(p + "mlp.up_proj.weight")),
                         self.w(p + "mlp.down_proj.weight"))
            x = x + m.float()
        h = rms(x, self.w("final_norm.weight"), self.eps)
        logits = F.linear(h, self.lm_head).float()
        u = self.w("markov_head.markov_w1.weight")[prev]                                            # [B,A,D,r]
        adjusted = logits + F.linear(u, self.w("markov_head.markov_w2.weight")).float()
        cw = self.w("confidence_head.proj.weight")[0]
        conf = (h * cw[:self.H]).sum(-1) + (u.float() * cw[self.H:]).sum(-1) + self.w("confidence_head.proj.bias")[0]
        return logits, adjusted, conf, h

    @torch.no_grad()
    def export(self):
        return {n: self.w(n).detach().float().cpu().to(torch.bfloat16).contiguous() for n in self.names}

    @torch.no_grad()
    def load(self, tensors):
        for n in self.names:
            self.w(n).copy_(tensors[n].float())


def markov_prev(toks, greedy, anchors, D):
    """prev_0 = token at L (pending), prev_j = g[L+j-1] (the target's greedy token row j-1 should give)."""
    pend = toks.gather(1, anchors)
    if D == 1:
        return pend[..., None]
    idx = anchors[..., None] + torch.arange(D - 1, device=toks.device)                              # L .. L+D-2
    rest = greedy.gather(1, idx.flatten(1)).view(*anchors.shape, D - 1)
    return torch.cat([pend[..., None], rest], dim=-1)


def labels(greedy, anchors, D):
    idx = anchors[..., None] + torch.arange(D, device=greedy.device)                                # L .. L+D-1
    return greedy.gather(1, idx.flatten(1)).view(*anchors.shape, D)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="corpus dir (train.txt.gz, val.txt.gz) or data dir (train.bin, val.bin)")
    ap.add_argument("out")
    ap.add_argument("--target", default="models/default/target")
    ap.add_argument("--seconds", type=float, default=150.0, help="training wall-clock budget")
    ap.add_argument("--prep-seconds", type=float, default=60.0, help="budget for the target's rows of the training set")
    ap.add_argument("--max-train-tokens", type=int, default=0)
    ap.add_argument("--max-val-tokens", type=int, default=0)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64, help="sequences per step")
    ap.add_argument("--anchors", type=int, default=64, help="anchors (blocks) per sequence per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--conf-weight", type=float, default=0.1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--q-lora", type=int, default=128)
    ap.add_argument("--kv-lora", type=int, default=64)
    ap.add_argument("--nope", type=int, default=32)
    ap.add_argument("--rope", type=int, default=16)
    ap.add_argument("--vdim", type=int, default=32)
    ap.add_argument("--intermediate", type=int, default=640)
    ap.add_argument("--markov-rank", type=int, default=64)
    ap.add_argument("--draft-tokens", type=int, default=7)
    ap.add_argument("--target-layer-ids", default="1,4,7")
    ap.add_argument("--mask-token-id", type=int, default=0, help="0: the first <|reserved_token_N|> of the target's tokenizer")
    ap.add_argument("--eval-seqs", type=int, default=12, help="held-out sequences for the reference evaluation")
    ap.add_argument("--eval-stride", type=int, default=4, help="anchor spacing in the reference evaluation")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    dev = args.device
    cuda = dev == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    T, D = args.seq, args.draft_tokens
    log(f"torch {torch.__version__}, device {dev}" + (f" ({torch.cuda.get_device_name()})" if cuda else ""))
    SUMMARY["args"] = vars(args)

    # -- target and tokenizer --
    target, tcfg = load_target(args.target, dev)
    tc = tcfg["text_config"]
    H, V, NL = tc["hidden_size"], tc["vocab_size"], tc["num_hidden_layers"]
    with open(os.path.join(args.target, "tokenizer_config.json")) as fh:
        tokcfg = json.load(fh)
    reserved = sorted(int(k) for k, v in tokcfg.get("added_tokens_decoder", {}).items()
                      if v["content"].startswith("<|reserved_token_"))
    mask_id = args.mask_token_id or reserved[0]
    spell = tokcfg["added_tokens_decoder"].get(str(mask_id), {}).get("content")
    assert spell and spell.startswith("<|reserved_token_"), f"mask token {mask_id} ({spell}) is not a reserved special"
    layer_ids = [int(x) for x in args.target_layer_ids.split(",")]
    assert layer_ids == sorted(set(layer_ids)) and layer_ids[-1] < NL, layer_ids
    log(f"target {args.target}: hidden {H}, {NL} layers, vocab {V}; mask token {mask_id} ({spell}); "
        f"context from target layers {layer_ids}")
    enc = None
    if not os.path.exists(os.path.join(args.data, "train.bin")):
        enc = load_encoding(args.target)
    t = time.time()
    train_ids = load_ids(args.data, "train", enc, args.max_train_tokens)
    val_ids = load_ids(args.data, "val", enc, args.max_val_tokens)
    log(f"data: {train_ids.size} train tokens, {val_ids.size} held-out tokens ({time.time() - t:.1f} s)")
    assert int(train_ids.max()) < V and int(val_ids.max()) < V
    SUMMARY["data"] = {"train_tokens": int(train_ids.size), "val_tokens": int(val_ids.size)}

    cfg = {
        "architectures": ["K3DSparkModel"],
        "model_type": "kimi_k3_dspark",
        "dtype": "bfloat16",
        "hidden_act": "silu",
        "hidden_size": H,
        "intermediate_size": args.intermediate,
        "kv_lora_rank": args.kv_lora,
        "markov_head_type": "vanilla",
        "markov_rank": args.markov_rank,
        "mask_token_id": mask_id,
        "max_position_embeddings": tc.get("max_position_embeddings", 1048576),
        "num_attention_heads": args.heads,
        "num_draft_tokens": D,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.heads,
        "q_lora_rank": args.q_lora,
        "qk_nope_head_dim": args.nope,
        "qk_rope_head_dim": args.rope,
        "rms_norm_eps": tc.get("rms_norm_eps", 1e-5),
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 32768, "type": "yarn"},
        "rope_theta": 50000.0,
        "target_layer_ids": layer_ids,
        "tie_word_embeddings": False,
        "v_head_dim": args.vdim,
        "vocab_size": V,
    }

    # -- capture check: a forward with capture gives the logits of one without --
    # In strict fp32 (no TF32): a TF32 rounding difference can flip a router's top-k choice and move
    # logits by percents, which would hide a real mismatch in noise.
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        x = torch.from_numpy(val_ids[:64].copy())[None].to(dev)
        lg, _ = target_forward(target, x, layer_ids)
        ref_lg = target(x)
        err = float((lg - ref_lg).abs().max() / ref_lg.abs().max())
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    log(f"check: capture forward vs K3.forward logits: max rel err {err:.3g}")
    SUMMARY["capture_check_max_rel_err"] = err
    # Exact on the CPU (0); on the GPU a different reduction order can still flip a top-k routing
    # choice, so only a gross mismatch stops the run.
    if err >= 1e-5:
        log("check: WARNING: not exact (see above); continuing unless it exceeds 0.1")
    assert err < 0.1, err

    # -- precompute the target's rows and greedy tokens of the training chunks --
    t = time.time()
    toks, rows, greedy = precompute(target, train_ids, T, layer_ids, dev, 64 if cuda else 4,
                                    time.time() + args.prep_seconds, cuda, shuffle=True)
    tf_acc = float((greedy[:, :-1] == toks[:, 1:]).float().mean())
    log(f"precompute: {toks.shape[0]} chunks x {T} = {toks.numel()} tokens, rows {tuple(rows.shape)} "
        f"({rows.numel() * 2 / 1e9:.2f} GB) in {time.time() - t:.1f} s; target greedy == corpus next token: {tf_acc:.3f}")
    SUMMARY["precompute"] = {"chunks": int(toks.shape[0]), "tokens": int(toks.numel()), "seconds": round(time.time() - t, 1),
                             "target_greedy_eq_corpus": tf_acc}
    vt = torch.from_numpy(val_ids[:(val_ids.size // T) * T].reshape(-1, T))
    n_val_train = min(vt.shape[0], 16)
    vtoks, vrows, vgreedy = precompute(target, val_ids[:n_val_train * T], T, layer_ids, dev, 16, time.time() + 60, cuda)

    # -- train --
    model = DSpark(cfg, target.w("model.embed_tokens.weight"), target.w("lm_head.weight"), max_pos=T + D + 1,
                   seed=args.seed).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"dspark: {n_params / 1e6:.2f} M trainable parameters")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if cuda else {}))
    N = toks.shape[0]
    A = min(args.anchors, T - D)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    warm = 50
    step, start = 0, time.time()
    hist = []

    def batch(tk, rw, gr, idx, A):
        # anchors L in [1, T-D]: labels g[L..L+D-1] exist; distinct anchors per sequence
        perm = torch.argsort(torch.rand(len(idx), T - D, generator=g), dim=1)[:, :A] + 1
        anchors = perm.to(dev)
        return rw[idx], tk[idx], anchors

    def loss_fn(rw, tk, gr, anchors):
        prev = markov_prev(tk, gr, anchors, D)
        y = labels(gr, anchors, D)
        with amp(cuda):
            logits, adjusted, conf, _ = model(rw, tk, anchors, prev)
        ce = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        ce_m = F.cross_entropy(adjusted.reshape(-1, V), y.reshape(-1))
        hit = (adjusted.argmax(-1) == y)
        bce = F.binary_cross_entropy_with_logits(conf.float(), hit.float())
        return ce, ce_m, bce, hit

    while True:
        el = time.time() - start
        if el >= args.seconds:
            break
        lr = args.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, el / args.seconds))))
        for gp in opt.param_groups:
            gp["lr"] = lr
        idx = torch.randint(0, N, (args.batch,), generator=g).to(dev)
        rw, tk, anchors = batch(toks, rows, greedy, idx, A)
        ce, ce_m, bce, hit = loss_fn(rw, tk, greedy[idx], anchors)
        loss = ce + ce_m + args.conf_weight * bce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == 1:
            accs = hit.float().mean(dim=(0, 1)).tolist()
            hist.append({"step": step, "s": round(time.time() - start, 1), "lr": lr, "ce": float(ce), "ce_markov": float(ce_m),
                         "bce": float(bce), "acc": [round(a, 4) for a in accs]})
            log(f"step {step} ({time.time() - start:.0f} s) lr {lr:.2e} ce {float(ce):.3f} ce+markov {float(ce_m):.3f} "
                f"bce {float(bce):.3f} row acc " + " ".join(f"{a:.2f}" for a in accs))
    train_s = time.time() - start
    log(f"train: {step} steps in {train_s:.1f} s ({step * args.batch * A * D / max(train_s, 1e-9):.0f} query rows/s)")

    # held-out teacher-forced accuracy of the training model (bf16 autocast), all anchors
    model.eval()
    with torch.no_grad():
        gv = torch.Generator().manual_seed(5)
        tot = torch.zeros(D)
        tot_ce, nb = 0.0, 0
        for i in range(vtoks.shape[0]):
            idx = torch.tensor([i], device=dev)
            anchors = (torch.arange(1, T - D + 1)[None]).to(dev)
            ce, ce_m, bce, hit = loss_fn(vrows[idx], vtoks[idx], vgreedy[idx], anchors)
            tot += hit.float().mean(dim=(0, 1)).cpu()
            tot_ce += float(ce_m)
            nb += 1
        del gv
    val_acc = (tot / max(nb, 1)).tolist()
    SUMMARY["train"] = {"steps": step, "seconds": round(train_s, 1), "batch_sequences": args.batch, "anchors_per_sequence": A,
                        "query_rows_seen": step * args.batch * A * D, "params": n_params,
                        "final": hist[-1] if hist else None, "history": hist,
                        "heldout_teacher_forced_row_acc": [round(a, 4) for a in val_acc],
                        "heldout_ce_markov": round(tot_ce / max(nb, 1), 4)}
    log(f"held-out (training model, teacher-forced on {nb} sequences): row acc " + " ".join(f"{a:.3f}" for a in val_acc))

    # -- export --
    out_dir = os.path.join(args.out, "models", "default", "dspark")
    res_dir = os.path.join(args.out, "tools", "train", "results")
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(res_dir, exist_ok=True)
    from safetensors.torch import save_file
    tensors = model.export()
    tensors["embed_tokens.weight"] = target.w("model.embed_tokens.weight").detach().float().cpu().to(torch.bfloat16).contiguous()
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True)
        fh.write("\n")
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    log(f"export: {out_dir}: {len(tensors)} tensors, {size / 1e6:.2f} MB")
    SUMMARY["export"] = {"dir": "models/default/dspark", "tensors": len(tensors), "bytes": size, "config": cfg}

    # -- reference evaluation of the export --
    evaluate(args, out_dir, target, layer_ids, val_ids, T, D, dev)

    SUMMARY["total_seconds"] = round(time.time() - T0, 1)
    with open(os.path.join(res_dir, "dspark_summary.json"), "w") as fh:
        json.dump(SUMMARY, fh, indent=2)
        fh.write("\n")
    short = {k: v for k, v in SUMMARY.items() if k not in ("args",)}
    short["train"] = {k: v for k, v in SUMMARY["train"].items() if k != "history"}
    print(json.dumps(short, indent=2), flush=True)
    return 0


@torch.no_grad()
def evaluate(args, out_dir, target, layer_ids, val_ids, T, D, dev):
    import dspark_ref
    import kimi_ref
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t = time.time()
    tref = kimi_ref.load_model(args.target, verbose=False)
    dref = dspark_ref.load(out_dir, tref, verbose=True)
    n_seq = min(args.eval_seqs, val_ids.size // T)
    # held-out sequences from the end of the split (the training-model check above used the start)
    seqs = [val_ids[val_ids.size - (s + 1) * T: val_ids.size - s * T] for s in range(n_seq)]
    anchors = list(range(8, T, args.eval_stride))
    # the target's greedy continuation of tok[0..L] (fp32 trainable target == kimi_ref to ~1e-6)
    conts = []
    for s in seqs:
        B = len(anchors)
        x = torch.zeros(B, T + D, dtype=torch.long)
        for b, L in enumerate(anchors):
            x[b, :L + 1] = torch.from_numpy(s[:L + 1].copy())
        x = x.to(dev)
        pos = torch.tensor(anchors, device=dev)
        out = torch.zeros(B, D, dtype=torch.long, device=dev)
        rows_b = torch.arange(B, device=dev)
        for k in range(D):
            lg = target(x[:, :max(anchors) + 1 + k])                                             # causal: padding after is unseen
            nxt = lg[rows_b, pos + k].argmax(-1)
            out[:, k] = nxt
            x[rows_b, pos + k + 1] = nxt
        conts.append(out.cpu())
    log(f"eval: greedy continuations of {n_seq} x {len(anchors)} anchors ({time.time() - t:.1f} s)")
    # parity: the training module loaded from the exported (BF16) files, fp32 on CPU, vs dspark_ref
    from safetensors.torch import load_file
    chk = DSpark(dref.c, tref.embed, tref.lm_head, max_pos=T + D + 1)
    chk.load(load_file(os.path.join(out_dir, "model.safetensors")))
    s0 = torch.from_numpy(seqs[0].copy())
    _, ctx0 = tref.forward(s0, capture=layer_ids)
    g0 = tref.forward(s0).argmax(-1)
    worst = 0.0
    for L in (1, 37, T - D):
        an = torch.tensor([[L]])
        prev = markov_prev(s0[None], g0[None], an, D)
        lg, adj, cf, _ = chk(ctx0[None], s0[None], an, prev)
        p = dref.propose(ctx0[:L], int(s0[L]))
        worst = max(worst, float((lg[0, 0] - p["logits"]).abs().max() / p["logits"].abs().max()))
        # confidence/adjusted are compared with the reference's own prev (its drafted tokens)
        prev_ref = torch.tensor([[[int(s0[L])] + p["tokens"][:-1]]])
        lg, adj, cf, _ = chk(ctx0[None], s0[None], an, prev_ref)
        worst = max(worst, float((adj[0, 0] - p["adjusted"]).abs().max() / p["adjusted"].abs().max()))
        worst = max(worst, float((cf[0, 0] - torch.tensor(p["confidence"])).abs().max() /
                                 torch.tensor(p["confidence"]).abs().max().clamp_min(1e-6)))
    log(f"check: training module on the exported weights vs dspark_ref (logits, adjusted, confidence): max rel err {worst:.3g}")
    SUMMARY["check_training_module_vs_dspark_ref_max_rel_err"] = worst
    hits = torch.zeros(D)
    tf_hits = torch.zeros(D)
    n_tf = 0
    first_ok = 0
    n = 0
    conf_acc, conf_rej = [], []
    t_ref = 0.0
    parity = None
    for si, s in enumerate(seqs):
        t1 = time.time()
        logits, ctx = tref.forward(torch.from_numpy(s.copy()), capture=layer_ids)
        g_ref = logits.argmax(-1)
        t_ref += time.time() - t1
        if si == 0:
            # parity: the trainable target's capture (fp32) vs kimi_ref's
            _, mine = target_forward(target, torch.from_numpy(s.copy())[None].to(dev), layer_ids)
            parity = float((mine[0].cpu() - ctx).abs().max() / ctx.abs().max())
            log(f"check: trainable target's captured rows vs kimi_ref capture: max rel err {parity:.3g}")
            SUMMARY["check_capture_vs_kimi_ref_max_rel_err"] = parity
        for b, L in enumerate(anchors):
            p = dref.propose(ctx[:L], int(s[L]))
            tokens = torch.tensor(p["tokens"])
            cont = conts[si][b]
            first_ok += int(cont[0] == g_ref[L])
            eq = (tokens == cont).long()
            run = torch.cumprod(eq, 0)
            hits += run.float()
            (conf_acc if eq[0] else conf_rej).append(p["confidence"][0])
            if L + D - 1 < T:
                tf = torch.cumprod((tokens == g_ref[L:L + D]).long(), 0)
                tf_hits += tf.float()
                n_tf += 1
            n += 1
    acc = (hits / n).tolist()
    tf_acc = (tf_hits / max(n_tf, 1)).tolist()
    expected = float(sum(acc))

    def mean(v):
        return float(sum(v) / len(v)) if v else None
    SUMMARY["eval_reference"] = {
        "anchors": n, "sequences": n_seq, "sequence_tokens": T, "anchor_stride": args.eval_stride,
        "acceptance_by_depth": [round(a, 4) for a in acc],
        "expected_accepted_drafts_per_block": round(expected, 4),
        "expected_tokens_per_verify": round(1 + expected, 4),
        "teacher_forced_acceptance_by_depth": [round(a, 4) for a in tf_acc],
        "greedy_first_step_equals_kimi_ref_argmax": round(first_ok / n, 4),
        "mean_raw_confidence_row0_accepted": mean(conf_acc), "mean_raw_confidence_row0_rejected": mean(conf_rej),
        "kimi_ref_forward_seconds": round(t_ref, 1), "seconds": round(time.time() - t, 1),
    }
    log("eval (dspark_ref on the export): acceptance by depth " + " ".join(f"{a:.3f}" for a in acc) +
        f"; expected accepted drafts per block {expected:.3f}")


if __name__ == "__main__":
    sys.exit(main())
