"""Trains, exports and measures the default model pair on the GPU machine (one device run). Stages,
each guarded so that a failure in a later one keeps what earlier ones wrote:
  check    chunked KDA and the whole trainable model against tools/reference/kimi_ref.py (fp32)
  target   train the K3 target until its deadline (last part quantisation-aware: fake MXFP4 experts
           with a straight-through gradient), export in the real format (MXFP4 experts)
  draft    train the draft until its deadline, export
  eval     validation loss/perplexity (master weights, exported MXFP4), the exported target through
           kimi_ref.py, draft agreement with the target, golden fixtures from kimi_ref.py
Outputs under --out: models/default/{target,draft}/, tests/fixtures/default_target/, tools/train/
results (losses_*.csv, summary.json).
Usage: python pipeline.py --data TOKDIR --out STAGING [--target-seconds 190 --draft-seconds 55]"""

import argparse
import json
import math
import os
import shutil
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file, load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import k3_model  # noqa: E402
import kimi_ref  # noqa: E402

SUMMARY = {}
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def stage(name, fn, *a, **kw):
    t = time.time()
    log(f"=== {name}")
    try:
        r = fn(*a, **kw)
        SUMMARY.setdefault("stages", {})[name] = f"PASS ({time.time() - t:.1f} s)"
        return r
    except Exception as e:  # noqa: BLE001 - keep going, record the failure
        traceback.print_exc()
        SUMMARY.setdefault("stages", {})[name] = f"FAIL ({type(e).__name__}: {e})"
        log(f"=== {name} FAILED: {e}")
        return None


def load_template(name):
    d = os.path.join(HERE, "templates", name)
    with open(os.path.join(d, "config.json")) as fh:
        cfg = json.load(fh)
    with open(os.path.join(d, "tensors.json")) as fh:
        roster = json.load(fh)
    return d, cfg, roster


# ---------------------------------------------------------------------------------------------
# check: trainable module == kimi_ref (fp32)
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def check_kda(dev):
    torch.manual_seed(0)
    H, K, D, T = 4, 64, 96, 45
    p = {n: torch.randn(H * K, D) * 0.1 for n in ("q_proj", "k_proj", "v_proj", "g_proj")}
    p["o_proj"] = torch.randn(D, H * K) * 0.1
    p["b_proj"] = torch.randn(H, D) * 0.3
    p["f_a"] = torch.randn(K, D) * 0.1
    p["f_b"] = torch.randn(H * K, K) * 0.3
    for n in "qkv":
        p[n + "_conv"] = torch.rand(H * K, 4) - 0.5
    p["o_norm"] = torch.rand(K) + 0.5
    p["dt_bias"] = torch.randn(H * K) - 2
    p["A_log"] = torch.randn(H) * 0.5
    x = torch.randn(T, D)
    ref = kimi_ref.kda(x, p, H, K, 1e-5, "lower_bound", -5.0)
    # the same layer through k3_model's pieces
    xd = x.to(dev).unsqueeze(0)
    pd = {k: v.to(dev) for k, v in p.items()}
    q = k3_model.causal_conv_silu(F.linear(xd, pd["q_proj"]), pd["q_conv"].unsqueeze(1))
    k = k3_model.causal_conv_silu(F.linear(xd, pd["k_proj"]), pd["k_conv"].unsqueeze(1))
    v = k3_model.causal_conv_silu(F.linear(xd, pd["v_proj"]), pd["v_conv"].unsqueeze(1))
    q = k3_model.l2norm(q.view(1, T, H, K)) / math.sqrt(K)
    k = k3_model.l2norm(k.view(1, T, H, K))
    r = (F.linear(F.linear(xd, pd["f_a"]), pd["f_b"]) + pd["dt_bias"]).view(1, T, H, K)
    g = -5.0 * torch.sigmoid(torch.exp(pd["A_log"]).view(1, 1, H, 1) * r)
    beta = torch.sigmoid(F.linear(xd, pd["b_proj"]))
    o = k3_model.chunk_kda(q, k, v.view(1, T, H, K), g, beta)
    o = k3_model.rms_norm(o, pd["o_norm"], 1e-5) * torch.sigmoid(F.linear(xd, pd["g_proj"]).view(1, T, H, K))
    got = F.linear(o.reshape(1, T, H * K), pd["o_proj"])[0].cpu()
    err = float((got - ref).abs().max() / ref.abs().max())
    log(f"check: chunked KDA layer vs kimi_ref recurrent (T={T}): max rel err {err:.3g}")
    SUMMARY["check_kda_max_rel_err"] = err
    assert err < 1e-4, err


@torch.no_grad()
def compare_with_ref(model, ckpt_dir, ids, dev, label):
    """kimi_ref forward (CPU fp32) on the exported checkpoint vs the trainable module loaded from the
    same files (fp32, no autocast). Returns (max rel err, ref logits, ref loss)."""
    ref = kimi_ref.load_model(ckpt_dir, verbose=False)
    ref_logits = ref.forward(ids)
    model.qat = False
    got = model(torch.tensor([ids], device=dev))[0].cpu()
    err = float(((got - ref_logits).abs().amax(-1) / ref_logits.abs().amax(-1)).max())
    tgt = torch.tensor(ids[1:])
    ref_loss = float(F.cross_entropy(ref_logits[:-1], tgt))
    log(f"check: {label}: trainable module vs kimi_ref on {len(ids)} tokens: max rel err {err:.3g}, "
        f"kimi_ref loss {ref_loss:.4f}")
    return err, ref_logits, ref_loss, ref


def check_model(dev, tmp):
    """Random-init target exported and read back by kimi_ref: module == reference before training."""
    d, cfg, roster = load_template("target")
    m = k3_model.K3(cfg).to(dev)
    with torch.no_grad():   # give the AttnRes projections and router biases some non-trivial values
        for name, attr in m.names.items():
            if "res_proj" in name:
                getattr(m, attr).normal_(0, 0.05)
        for l in range(m.L):
            if m.is_moe[l]:
                getattr(m, f"bias_{l}").normal_(0, 0.01)
    out = os.path.join(tmp, "check_target")
    try:
        export(m, d, cfg, roster, out, None)
        m2 = k3_model.K3(cfg).to(dev)
        m2.load_exported(load_dir(out))
        ids = torch.randint(0, cfg["text_config"]["vocab_size"], (40,), generator=torch.Generator().manual_seed(3)).tolist()
        err, *_ = compare_with_ref(m2, out, ids, dev, "random-init target")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    SUMMARY["check_model_max_rel_err"] = err
    assert err < 1e-4, err


# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------


def load_dir(d):
    t = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors") and f != "expected.safetensors":
            t.update(load_file(os.path.join(d, f)))
    return t


def export(model, tpl_dir, cfg, roster, out, tok_dir):
    os.makedirs(out, exist_ok=True)
    tensors = model.export_tensors(roster)
    weight_map, total = {}, 0
    for fname, items in roster["files"].items():
        part = {name: tensors[name] for name, _, _ in items}
        save_file(part, os.path.join(out, fname), metadata={"format": "pt"})
        for name in part:
            weight_map[name] = fname
            total += part[name].numel() * part[name].element_size()
    if roster.get("index"):
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2)
    for f in ("config.json", "generation_config.json"):
        with open(os.path.join(tpl_dir, f)) as src, open(os.path.join(out, f), "w") as dst:
            dst.write(src.read())
    if tok_dir:
        for f in ("tiktoken.model", "tokenizer_config.json"):
            with open(os.path.join(tok_dir, f), "rb") as src, open(os.path.join(out, f), "wb") as dst:
                dst.write(src.read())
    log(f"export: {out}: {len(tensors)} tensors, {total / 1e6:.1f} MB")


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------


class Batches:
    def __init__(self, ids, T, B, dev, seed):
        self.ids = torch.from_numpy(ids.astype(np.int64))
        self.T, self.B, self.dev = T, B, dev
        self.g = torch.Generator().manual_seed(seed)

    def next(self):
        starts = torch.randint(0, self.ids.numel() - self.T - 1, (self.B,), generator=self.g)
        x = torch.stack([self.ids[s:s + self.T + 1] for s in starts.tolist()])
        x = x.to(self.dev, non_blocking=True)
        return x[:, :-1], x[:, 1:]


EVAL_TOKENS = [131072]


@torch.no_grad()
def eval_loss(model, val, dev, T=256, max_tokens=None, bs=32, autocast=False):
    max_tokens = max_tokens or EVAL_TOKENS[0]
    model.eval()
    n = min(val.size - 1, max_tokens) // T * T
    x = torch.from_numpy(val[:n + 1].astype(np.int64))
    tot, cnt = 0.0, 0
    for i in range(0, n, T * bs):
        j = min(n, i + T * bs)
        inp = x[i:j].view(-1, T).to(dev)
        tgt = x[i + 1:j + 1].view(-1, T).to(dev)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=autocast and dev == "cuda"):
            logits = model(inp)
        tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum"))
        cnt += tgt.numel()
    model.train()
    return tot / max(cnt, 1)


def train(name, model, train_ids, val_ids, dev, seconds, T, B, lr, csv_path, qat_from=None, bias_rate=1e-3,
          eval_tokens=32768):
    decay, no_decay = [], []
    for pname, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed_tokens" not in pname else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if dev == "cuda" else {}))
    data = Batches(train_ids, T, B, dev, seed=17)
    warm = 30
    step, tokens = 0, 0
    t_start = time.time()
    last_eval = t_start
    rows = ["step,tokens,seconds,lr,train_loss,val_loss,qat"]
    model.train()
    ema = None
    best_val, best_state, best_step = float("inf"), None, 0
    while True:
        el = time.time() - t_start
        if el >= seconds:
            break
        frac = el / seconds
        if qat_from is not None and not model.qat and frac >= qat_from:
            model.qat = True
            best_val, best_state = float("inf"), None   # compare only states with quantised experts
            log(f"{name}: quantisation-aware phase from step {step} (fake MXFP4 experts, straight-through)")
        cur = lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for gr in opt.param_groups:
            gr["lr"] = cur
        x, y = data.next()
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.update_router_bias(bias_rate)
        step += 1
        tokens += x.numel()
        lv = float(loss)
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        val = ""
        now = time.time()
        if now - last_eval > max(10.0, seconds / 12) or step == 1:
            v = eval_loss(model, val_ids, dev, max_tokens=eval_tokens, autocast=True)
            val = f"{v:.4f}"
            if v < best_val:
                best_val, best_step = v, step
                best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
                best_qat = model.qat
            last_eval = time.time()
        if step % 25 == 0 or val:
            log(f"{name}: step {step} tokens {tokens / 1e6:.2f}M lr {cur:.2e} loss {lv:.4f} (ema {ema:.4f})"
                + (f" val {val}" if val else "") + (" qat" if model.qat else ""))
        rows.append(f"{step},{tokens},{now - t_start:.2f},{cur:.3e},{lv:.5f},{val},{int(model.qat)}")
    with open(csv_path, "w") as fh:
        fh.write("\n".join(rows) + "\n")
    info = {"steps": step, "tokens_seen": tokens, "seconds": round(time.time() - t_start, 1), "batch": [B, T],
            "peak_lr": lr, "final_train_loss_ema": ema, "qat_at_end": model.qat}
    final_val = eval_loss(model, val_ids, dev, max_tokens=eval_tokens, autocast=True)
    info["final_val_loss_32k"] = final_val
    if best_state is not None and final_val > best_val + 0.01:
        # held-out loss rose again (over-fitting the small corpus): keep the best weights seen
        model.load_state_dict(best_state)
        model.qat = best_qat
        info["restored_best"] = {"step": best_step, "val_loss_32k": best_val, "qat": best_qat}
        log(f"{name}: final val {final_val:.4f} > best {best_val:.4f} at step {best_step}: restored the best weights")
    log(f"{name}: trained {step} steps, {tokens / 1e6:.2f}M tokens in {info['seconds']} s")
    return info


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def greedy_batch(model, prompts, n):
    seq = prompts.clone()
    for _ in range(n):
        nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
    return seq


@torch.no_grad()
def acceptance(target, draft, val, dev, out):
    """Agreement of the draft's greedy next token with the target's, (a) teacher-forced on held-out
    text and (b) on the target's own greedy continuations of held-out prompts (what speculative
    decoding verifies), plus the mean accepted run for drafting depth 4 and 8 in case (b)."""
    target.qat = draft.qat = False
    T, nb = 256, 16
    x = torch.from_numpy(val[:T * nb].astype(np.int64)).view(nb, T).to(dev)
    a = float((target(x).argmax(-1) == draft(x).argmax(-1)).float().mean())
    P, G, n = 32, 48, 16
    starts = np.linspace(0, val.size - P - 1, n).astype(np.int64)
    prompts = torch.stack([torch.from_numpy(val[s:s + P].astype(np.int64)) for s in starts]).to(dev)
    seq = greedy_batch(target, prompts, G)
    tg = seq[:, P:]
    dg = draft(seq[:, :-1]).argmax(-1)[:, P - 1:]
    match = (tg == dg)
    b = float(match.float().mean())
    runs = {}
    for depth in (4, 8):
        acc = []
        for r in match.cpu().tolist():
            i = 0
            while i < len(r):   # each verify step accepts the leading matches, up to depth, plus one target token
                k = 0
                while k < depth and i + k < len(r) and r[i + k]:
                    k += 1
                acc.append(k)
                i += k + 1
        runs[depth] = sum(acc) / len(acc)
    res = {"teacher_forced_agreement": a, "on_target_greedy_agreement": b,
           "mean_accepted_per_verify_depth4": runs[4], "mean_accepted_per_verify_depth8": runs[8]}
    log(f"acceptance: {res}")
    out.update(res)


@torch.no_grad()
def fixtures(target, tok_dir, ckpt_dir, dev, fixture_dir):
    import tiktoken
    sys.path.insert(0, HERE)
    import tok_train
    ranks = {}
    import base64
    with open(os.path.join(tok_dir, "tiktoken.model")) as fh:
        for line in fh:
            b, r = line.split()
            ranks[base64.b64decode(b)] = int(r)
    enc = tiktoken.Encoding(name="sluice_default", pat_str=tok_train.K3_PAT, mergeable_ranks=ranks, special_tokens={})
    prompts = ["In the beginning God created the heaven and the earth. And the earth was",
               "The Python interpreter has a number of functions",
               "Debian is a"]
    ref = kimi_ref.load_model(ckpt_dir, verbose=False)
    target.qat = False
    tensors, info = {}, {"prompts": []}
    for i, text in enumerate(prompts):
        ids = enc.encode_ordinary(text)
        seq = greedy_batch(target, torch.tensor([ids], device=dev), 32)[0].tolist()
        greedy = seq[len(ids):]
        full = ref.forward(seq[:-1])                     # one reference pass checks every greedy step
        ref_next = full[len(ids) - 1:].argmax(-1).tolist()
        if ref_next != greedy:
            log(f"fixtures: prompt {i}: module greedy differs from kimi_ref; using kimi_ref's own greedy loop")
            greedy = ref.greedy(ids, 32)
            full = ref.forward(ids + greedy[:-1])
        top2 = torch.topk(full[len(ids) - 1:], 2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        logits = ref.forward(ids)
        tensors[f"prompt_ids_{i}"] = torch.tensor(ids, dtype=torch.int32)
        tensors[f"logits_{i}"] = logits.contiguous()
        tensors[f"greedy_ids_{i}"] = torch.tensor(greedy, dtype=torch.int32)
        text_out = enc.decode(greedy)
        info["prompts"].append({"text": text, "length": len(ids), "min_greedy_margin": margin,
                                "continuation": text_out})
        log(f"fixtures: prompt {i} ({len(ids)} tokens) margin {margin:.3g}: {text!r} -> {text_out!r}")
    os.makedirs(fixture_dir, exist_ok=True)
    save_file(tensors, os.path.join(fixture_dir, "expected.safetensors"))
    with open(os.path.join(fixture_dir, "fixture_info.json"), "w") as fh:
        json.dump(info, fh, indent=2)
    SUMMARY["fixtures"] = info


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="tok_train.py output folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--target-seconds", type=float, default=190)
    ap.add_argument("--draft-seconds", type=float, default=55)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--target-batch", type=int, default=64)
    ap.add_argument("--draft-batch", type=int, default=64)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--qat-from", type=float, default=0.75, help="fraction of the target's time after which QAT starts")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--eval-tokens", type=int, default=131072, help="held-out tokens for the final losses")
    ap.add_argument("--eval-tokens-during", type=int, default=32768, help="held-out tokens for losses while training")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    EVAL_TOKENS[0] = args.eval_tokens
    torch.backends.cuda.matmul.allow_tf32 = False     # fp32 checks must be fp32; training runs in bf16 autocast
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    out = args.out
    res_dir = os.path.join(out, "tools", "train", "results")
    tgt_dir = os.path.join(out, "models", "default", "target")
    dft_dir = os.path.join(out, "models", "default", "draft")
    fix_dir = os.path.join(out, "tests", "fixtures", "default_target")
    os.makedirs(res_dir, exist_ok=True)
    SUMMARY["device"] = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    SUMMARY["torch"] = torch.__version__
    train_ids = np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.int32)
    val_ids = np.fromfile(os.path.join(args.data, "val.bin"), dtype=np.int32)
    SUMMARY["train_tokens_in_corpus"] = int(train_ids.size)
    SUMMARY["val_tokens"] = int(val_ids.size)
    log(f"data: {train_ids.size} train tokens, {val_ids.size} val tokens on {SUMMARY['device']}")

    def save_summary():
        with open(os.path.join(res_dir, "summary.json"), "w") as fh:
            json.dump(SUMMARY, fh, indent=2, default=str)

    if not args.skip_checks:
        stage("check_kda", check_kda, dev)
        stage("check_model", check_model, dev, os.path.join(out, "tmp"))
    save_summary()

    # target
    tpl_t, cfg_t, roster_t = load_template("target")
    target = k3_model.K3(cfg_t).to(dev)
    SUMMARY["target_params"] = sum(p.numel() for p in target.parameters())
    info = stage("train_target", train, "target", target, train_ids, val_ids, dev, args.target_seconds, args.seq,
                 args.target_batch, args.target_lr, os.path.join(res_dir, "losses_target.csv"), qat_from=args.qat_from,
                 eval_tokens=args.eval_tokens_during)
    SUMMARY["target_training"] = info
    stage("export_target", export, target, tpl_t, cfg_t, roster_t, tgt_dir, args.data)
    save_summary()

    # draft
    tpl_d, cfg_d, roster_d = load_template("draft")
    draft = k3_model.K3(cfg_d).to(dev)
    SUMMARY["draft_params"] = sum(p.numel() for p in draft.parameters())
    info = stage("train_draft", train, "draft", draft, train_ids, val_ids, dev, args.draft_seconds, args.seq,
                 args.draft_batch, args.draft_lr, os.path.join(res_dir, "losses_draft.csv"), qat_from=0.7,
                 eval_tokens=args.eval_tokens_during)
    SUMMARY["draft_training"] = info
    stage("export_draft", export, draft, tpl_d, cfg_d, roster_d, dft_dir, args.data)
    save_summary()

    # evaluation
    ev = {}
    SUMMARY["eval"] = ev

    def losses():
        target.qat = False
        ev["target_val_loss_master_fp32_experts"] = eval_loss(target, val_ids, dev)
        target.qat = True
        ev["target_val_loss_master_fake_mxfp4_experts"] = eval_loss(target, val_ids, dev)
        target.qat = False
        exp_t = k3_model.K3(cfg_t).to(dev)
        exp_t.load_exported(load_dir(tgt_dir))
        ev["target_val_loss_exported"] = eval_loss(exp_t, val_ids, dev)
        draft.qat = False
        exp_d = k3_model.K3(cfg_d).to(dev)
        exp_d.load_exported(load_dir(dft_dir))
        ev["draft_val_loss_exported"] = eval_loss(exp_d, val_ids, dev)
        for k in list(ev):
            if k.endswith("val_loss") or "val_loss" in k:
                ev[k.replace("val_loss", "val_ppl")] = math.exp(ev[k])
        ev["val_tokens_used"] = int(min(val_ids.size - 1, args.eval_tokens) // 256 * 256)
        log(f"eval: {json.dumps(ev, indent=1)}")
        return exp_t, exp_d

    r = stage("eval_losses", losses)
    save_summary()
    if r:
        exp_t, exp_d = r

        def ref_check():
            ids = val_ids[1000:1000 + 96].tolist()
            err, _, ref_loss, _ = compare_with_ref(exp_t, tgt_dir, ids, dev, "exported target")
            ev["kimi_ref_vs_module_max_rel_err_target"] = err
            ev["kimi_ref_loss_96_val_tokens_target"] = ref_loss
            err_d, _, ref_loss_d, _ = compare_with_ref(exp_d, dft_dir, ids, dev, "exported draft")
            ev["kimi_ref_vs_module_max_rel_err_draft"] = err_d
            ev["kimi_ref_loss_96_val_tokens_draft"] = ref_loss_d
            assert err < 1e-4 and err_d < 1e-4, (err, err_d)

        stage("kimi_ref_check", ref_check)
        save_summary()
        stage("acceptance", acceptance, exp_t, exp_d, val_ids, dev, ev)
        save_summary()
        stage("fixtures", fixtures, exp_t, args.data, tgt_dir, dev, fix_dir)
    save_summary()
    log(f"summary: {json.dumps(SUMMARY, indent=1, default=str)}")
    bad = [k for k, v in SUMMARY.get("stages", {}).items() if not v.startswith("PASS")]
    log("pipeline:", "ALL PASS" if not bad else f"FAILED stages {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
