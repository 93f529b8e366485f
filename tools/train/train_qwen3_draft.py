"""A cross-tokenizer draft for the default target: a tiny transformers Qwen3ForCausalLM with its own
byte-level BPE tokenizer.json (Qwen2/3's pre-tokenizer pattern, NFC, 2,048 merges-based ids plus
three ChatML specials), trained on the same corpus as models/default (tools/train/make_corpus.sh).
Its tokenizer differs from the target's tiktoken.model on purpose: it exercises drafting through
text (spec §5.3), where proposals are kept only when their re-encoding with the target tokenizer
extends the committed history exactly.

Writes OUT/models/default/draft-qwen3/{config.json, generation_config.json, model.safetensors (bf16),
tokenizer.json, tokenizer_config.json, expected.safetensors} and OUT/tools/train/results/
qwen3_draft_summary.json. expected.safetensors holds, for two held-out text snippets, prompt_ids_i,
logits_i [T,V] and greedy_ids_i [32] from transformers on the exported bf16 weights (fp32 compute):
the engine's qwen3 implementation is checked against them exactly like the random fixtures.

Usage: python train_qwen3_draft.py CORPUS_DIR OUT [--seconds 90]
"""

import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tok_train import read_docs  # noqa: E402  (documents of the corpus files, split as make_corpus.py wrote them)

# Qwen2/Qwen3 tokenizer.json pre-tokenizer pattern.
QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
            r"|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 2048  # ordinary tokens (256 bytes + merges); specials follow


def train_tokenizer(docs, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    tok.add_special_tokens(SPECIALS)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as fh:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                   "bos_token": None, "model_max_length": 4096, "add_prefix_space": False}, fh, indent=2)
    return Tokenizer.from_file(path)


def encode_docs(tok, docs, eos):
    ids = []
    for enc in tok.encode_batch(docs):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def build_model(vocab):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    kw = dict(vocab_size=vocab, hidden_size=192, intermediate_size=512, num_hidden_layers=4, num_attention_heads=6,
              num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=4096,
              tie_word_embeddings=True, attention_bias=False, use_sliding_window=False, hidden_act="silu",
              bos_token_id=None, eos_token_id=vocab - 3, pad_token_id=vocab - 3)
    try:
        cfg = Qwen3Config(**kw, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    except TypeError:
        cfg = Qwen3Config(**kw, rope_theta=10000.0)
    return Qwen3ForCausalLM(cfg)


@torch.no_grad()
def eval_loss(model, data, seq, dev, max_tokens=131072):
    model.eval()
    n = min(len(data) - 1, max_tokens) // seq
    x = data[: n * seq].view(n, seq)
    y = data[1: n * seq + 1].view(n, seq)
    tot = 0.0
    for i in range(0, n, 64):
        xb, yb = x[i:i + 64].to(dev), y[i:i + 64].to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            lg = model(xb).logits
        tot += float(torch.nn.functional.cross_entropy(lg.float().flatten(0, 1), yb.flatten(), reduction="sum"))
    model.train()
    return tot / (n * seq)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=90)
    args = ap.parse_args()
    t_start = time.time()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    mdir = os.path.join(args.out, "models", "default", "draft-qwen3")
    rdir = os.path.join(args.out, "tools", "train", "results")
    os.makedirs(mdir, exist_ok=True)
    os.makedirs(rdir, exist_ok=True)

    train_docs = read_docs(os.path.join(args.corpus, "train.txt.gz"))
    val_docs = read_docs(os.path.join(args.corpus, "val.txt.gz"))
    tok = train_tokenizer(train_docs, mdir)
    V = tok.get_vocab_size()
    eos = tok.token_to_id("<|endoftext|>")
    assert V == VOCAB + len(SPECIALS) and eos == VOCAB, (V, eos)
    for d in val_docs[:20]:  # round trip (NFC text)
        import unicodedata
        assert tok.decode(tok.encode(d).ids, skip_special_tokens=False) == unicodedata.normalize("NFC", d)
    train = encode_docs(tok, train_docs, eos)
    val = encode_docs(tok, val_docs, eos)
    chars = sum(len(d) for d in train_docs)
    print(f"tokenizer: vocab {V}, train {len(train)} tokens ({chars / len(train):.2f} chars/token), "
          f"val {len(val)} tokens; {time.time() - t_start:.1f} s", flush=True)

    torch.manual_seed(4242)
    model = build_model(V).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    seq, batch = 256, 64
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    deadline = time.time() + args.seconds
    t0, step, losses = time.time(), 0, []
    g = torch.Generator().manual_seed(7)
    data = train.to(dev)
    model.train()
    while True:
        frac = (time.time() - t0) / args.seconds
        if frac >= 1:
            break
        lr = 3e-3 * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for pg in opt.param_groups:
            pg["lr"] = lr
        starts = torch.randint(0, len(train) - seq - 1, (batch,), generator=g).to(dev)
        idx = starts[:, None] + torch.arange(seq + 1, device=dev)[None, :]
        xb, yb = data[idx[:, :-1]], data[idx[:, 1:]]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev == "cuda"):
            lg = model(xb).logits
        loss = torch.nn.functional.cross_entropy(lg.float().flatten(0, 1), yb.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            losses.append((step, round(time.time() - t0, 1), float(loss)))
            print(f"  step {step} t={time.time() - t0:.0f}s loss {float(loss):.3f} lr {lr:.2e}", flush=True)
        step += 1
        if time.time() > deadline:
            break
    val_master = eval_loss(model, val, seq, dev)

    # Export in bf16, reload in fp32 and measure again: what the engine runs is the bf16 checkpoint.
    model = model.float().cpu()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    model.generation_config.eos_token_id = eos
    model.to(torch.bfloat16).save_pretrained(mdir, safe_serialization=True)
    from transformers import Qwen3ForCausalLM
    hf = Qwen3ForCausalLM.from_pretrained(mdir, dtype=torch.float32, attn_implementation="eager").eval()
    val_export = eval_loss(hf.to(dev), val, seq, dev)
    hf = hf.cpu()

    # Expected outputs on held-out text for the engine's parity test.
    from safetensors.torch import save_file
    tensors, margins = {}, []
    with torch.no_grad():
        for i, (doc, n) in enumerate(((val_docs[0], 24), (val_docs[len(val_docs) // 2], 40))):
            ids = tok.encode(doc).ids[:n]
            logits = hf(torch.tensor([ids])).logits[0].float()
            seqs, out, margin = list(ids), [], float("inf")
            for _ in range(32):
                row = hf(torch.tensor([seqs])).logits[0, -1].float()
                top = torch.topk(row, 2)
                margin = min(margin, float(top.values[0] - top.values[1]))
                out.append(int(top.indices[0]))
                seqs.append(out[-1])
            tensors[f"prompt_ids_{i}"] = torch.tensor(ids, dtype=torch.int32)
            tensors[f"logits_{i}"] = logits.contiguous()
            tensors[f"greedy_ids_{i}"] = torch.tensor(out, dtype=torch.int32)
            margins.append(margin)
            print(f"  parity prompt {i}: {tok.decode(ids)!r} -> {tok.decode(out)!r} (min margin {margin:.3g})",
                  flush=True)
    save_file(tensors, os.path.join(mdir, "expected.safetensors"))

    summary = {"params": nparams, "vocab": V, "steps": step, "tokens_seen": step * batch * seq,
               "train_seconds": round(time.time() - t0, 1), "val_loss_master": val_master,
               "val_loss_exported_bf16": val_export, "val_ppl_exported": math.exp(val_export),
               "train_tokens": len(train), "val_tokens": len(val), "chars_per_token": chars / len(train),
               "greedy_min_margins": margins, "losses": losses, "total_seconds": round(time.time() - t_start, 1)}
    with open(os.path.join(rdir, "qwen3_draft_summary.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
