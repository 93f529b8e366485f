"""Certifies tools/reference/kimi_ref.py against transformers' KimiLinearForCausalLM: for the two
tiny configs of tiny_kimi_linear.py (saved with save_pretrained in bf16, loaded back in fp32),
the reference's logits must equal transformers' with max relative error <= 1e-4, for the whole
model and module by module (every KDA layer, MLA layer, MoE block and dense MLP, on the exact
inputs transformers fed them). Then runs the K3 path on tiny K3 checkpoints written by
tools/fixtures/make_tiny_k3.py (finite logits, A_log padding check). Exits non-zero on mismatch.

Usage: python check_vs_transformers.py [--workdir DIR] [--tol 1e-4]
"""

import argparse
import json
import os
import sys
import tempfile
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import kimi_ref  # noqa: E402
import tiny_kimi_linear as tiny  # noqa: E402


def describe_checkpoint(ckpt_dir):
    """Prints the tensor names / shapes / dtypes and config.json that save_pretrained wrote."""
    from safetensors import safe_open
    files = sorted(f for f in os.listdir(ckpt_dir) if f.endswith(".safetensors"))
    print(f"--- {ckpt_dir}: files {sorted(os.listdir(ckpt_dir))}")
    for fn in files:
        with safe_open(os.path.join(ckpt_dir, fn), framework="pt") as f:
            for k in sorted(f.keys()):
                sl = f.get_slice(k)
                print(f"    {k:70s} {sl.get_dtype():5s} {list(sl.get_shape())}")
    with open(os.path.join(ckpt_dir, "config.json")) as fh:
        print("    config.json:", json.dumps(json.load(fh), sort_keys=True))


@torch.no_grad()
def module_checks(hf, ref, ids):
    """Hooks transformers' attention and MLP modules, re-computes each with the reference on the
    captured input, returns {kind: max rel err}."""
    captured = []
    handles = []

    def make_hook(l, kind):
        def hook(mod, args, kwargs, out):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            y = out[0] if isinstance(out, tuple) else out
            captured.append((kind, l, x.detach()[0].clone(), y.detach()[0].clone()))
        return hook

    for l, layer in enumerate(hf.model.layers):
        kind = "KDA" if ref.layer_types[l] == "linear_attention" else "MLA"
        handles.append(layer.self_attn.register_forward_hook(make_hook(l, kind), with_kwargs=True))
        kind = "dense MLP" if ref.mlp_types[l] == "dense" else "MoE"
        handles.append(layer.mlp.register_forward_hook(make_hook(l, kind), with_kwargs=True))
    hf(torch.tensor([list(ids)]), use_cache=False)
    for h in handles:
        h.remove()
    errs = {}
    for kind, l, x, y in captured:
        if kind == "KDA":
            r = ref.kda_layer(l, x)
        elif kind == "MLA":
            r = ref.mla_layer(l, x)
        else:
            r = ref.mlp_layer(l, x)
        e = tiny.rel_err(r, y)
        errs[kind] = max(errs.get(kind, 0.0), e)
        print(f"    layer {l} {kind:9s} max rel err {e:.3e}  (|y|max {float(y.abs().max()):.3g})")
    return errs


@torch.no_grad()
def check_kimi_linear(name, seed, workdir, tol):
    print(f"=== {name} (seed {seed})", flush=True)
    model = tiny.build(name, seed)
    ckpt = os.path.join(workdir, name)
    tiny.save(model, ckpt)
    describe_checkpoint(ckpt)
    hf = tiny.load_fp32(ckpt)
    n = tiny.assert_same_weights(model, hf)
    print(f"    reloaded fp32 model: {n} tensors equal to the bf16 originals")
    print(f"    experts implementation: {getattr(hf.config, '_experts_implementation', '?')}, "
          f"attention: {getattr(hf.config, '_attn_implementation', '?')}")
    ref = kimi_ref.load_model(ckpt)
    V = hf.config.vocab_size
    g = torch.Generator().manual_seed(seed + 100)
    ok = True
    worst = 0.0
    # 100 positions exercises transformers' multi-chunk (64) KDA path against the token loop.
    for T in (1, 7, 19, 100):
        ids = torch.randint(0, V, (T,), generator=g).tolist()
        a = ref.forward(ids)
        b = tiny.hf_logits(hf, ids)
        e = tiny.rel_err(a, b)
        worst = max(worst, e)
        same_argmax = bool((a.argmax(-1) == b.argmax(-1)).all())
        print(f"    whole model T={T:3d}: max rel err {e:.3e}, argmax equal at every position: {same_argmax}")
        ok &= e <= tol and same_argmax
    print("    module by module (T=19):")
    ids = torch.randint(0, V, (19,), generator=g).tolist()
    errs = module_checks(hf, ref, ids)
    for k, e in sorted(errs.items()):
        ok &= e <= tol
    print(f"    SUMMARY {name}: whole model {worst:.3e}, " +
          ", ".join(f"{k} {e:.3e}" for k, e in sorted(errs.items())) + f" -> {'OK' if ok else 'FAIL'}", flush=True)
    return ok, worst, errs


@torch.no_grad()
def check_k3(workdir):
    import make_tiny_k3
    # MXFP4: all 16 codes, low nibble = even column, scale 2^(s-127) (both extremes)
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    e2m1 = mags + [-m for m in mags]
    packed = torch.tensor([[i | ((15 - i) << 4) for i in range(16)]] * 3, dtype=torch.uint8)
    scale = torch.tensor([[127], [250], [1]], dtype=torch.uint8)
    w = kimi_ref.dequant_mxfp4(packed, scale).double()
    want = torch.tensor([[e2m1[c // 2] if c % 2 == 0 else e2m1[15 - c // 2] for c in range(32)]], dtype=torch.float64)
    want = want * torch.tensor([[1.0], [2.0 ** 123], [2.0 ** -126]], dtype=torch.float64)
    ok = torch.equal(w, want)
    print(f"    MXFP4 decode of all 16 codes at scales 127/250/1 exact: {ok}")
    for variant, seed in (("a", 3), ("b", 4)):
        ckpt = make_tiny_k3.make(os.path.join(workdir, f"k3_tiny_{variant}"), seed, variant)
        ref = kimi_ref.load_model(ckpt)
        V = ref.embed.shape[0]
        ids = torch.randint(0, V, (13,), generator=torch.Generator().manual_seed(seed)).tolist()
        logits = ref.forward(ids)
        finite = bool(torch.isfinite(logits).all())
        # the last position of a longer sequence must not change earlier positions (causality)
        logits2 = ref.forward(ids + [5, 6])
        causal = tiny.rel_err(logits2[:13], logits) < 1e-5
        print(f"    K3 {variant}: logits {tuple(logits.shape)} finite {finite} |max| {float(logits.abs().max()):.3g} "
              f"std {float(logits.std()):.3g}, causal {causal}, greedy {ref.greedy(ids, 6)}")
        ok &= finite and causal
        # AttnRes is exercised: zeroing every res_proj (uniform mixing) changes the logits
        cfg = json.load(open(os.path.join(ckpt, "config.json")))
        tensors = kimi_ref.read_tensors(ckpt)
        flat = {k: (torch.zeros_like(t) if "res_proj" in k else t) for k, t in tensors.items()}
        d = tiny.rel_err(kimi_ref.KimiK3Ref(cfg, flat, verbose=False).forward(ids), logits)
        print(f"    K3 {variant}: rel change of logits with res_proj zeroed {d:.3e}")
        ok &= d > 1e-4
        # A_log padding must be refused when non-zero
        name = next(k for k in tensors if k.endswith("self_attn.A_log"))
        bad = tensors[name].clone()
        bad[-1] = 0.25
        tensors[name] = bad
        try:
            kimi_ref.KimiK3Ref(cfg, tensors, verbose=False)
            print("    K3: non-zero A_log padding was NOT refused")
            ok = False
        except AssertionError as e:
            print(f"    K3: non-zero A_log padding refused: {e}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="kimi_check_")
    os.makedirs(workdir, exist_ok=True)
    all_ok = True
    summary = {}
    for name, seed in (("kimi_linear_a", 11), ("kimi_linear_b", 12)):
        try:
            ok, worst, errs = check_kimi_linear(name, seed, workdir, args.tol)
        except Exception:
            traceback.print_exc()
            ok, worst, errs = False, float("nan"), {}
        all_ok &= ok
        summary[name] = {"whole_model": worst, **errs}
    print("=== K3 path (tiny checkpoints written by make_tiny_k3.py)", flush=True)
    try:
        all_ok &= check_k3(workdir)
    except Exception:
        traceback.print_exc()
        all_ok = False
    print("RESULT", json.dumps(summary), "PASS" if all_ok else "FAIL", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
