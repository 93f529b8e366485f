"""Tokenizer of the default model pair: a byte-level BPE trained with Hugging Face `tokenizers` on
the training text (pre-split by the Kimi K3 pattern of spec §4.2), written in the K3 file format:
tiktoken.model (base64 bytes SPACE rank; ranks 0..4095 contiguous, the 256 single bytes first, then
one token per merge in merge order) and tokenizer_config.json (256 specials after the ranks with
the K3 spellings of spec §4.1). The corpus is then encoded with tiktoken built from that rank file
and the same pattern the C++ loader applies, and the round trip is checked on the validation text.
Writes OUT/tiktoken.model, OUT/tokenizer_config.json, OUT/train.bin, OUT/val.bin (int32 ids),
OUT/tokenizer_cases.json (lines and their ids, for the C++ check) and OUT/tokenizer_stats.json.
Usage: python tok_train.py CORPUS_DIR OUT_DIR [--ranks 4096]"""

import argparse
import base64
import gzip
import json
import os
import sys
import time

N_SPECIAL = 256
DOC_SEP = "\n\f\n"

# Spec §4.2, spelled as tokenization_kimi.py spells it for tiktoken (tools/tokenizer/oracle.py).
K3_PAT = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# K3 special spellings by offset from the first special id (spec §4.1: 163584 + offset).
K3_SPECIALS = {0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
               6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]", 18: "<|media_begin|>",
               19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>", 65: "<osagent_mode>",
               254: "[UNK]", 255: "[PAD]"}

CASE_LINES = [
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light.",
    "The Python interpreter has a number of functions and types built into it.",
    ">>> print(sorted({3: 'c', 1: 'a'}.items()))  # don't panic, it's 2024!",
    "apt-get install --no-install-recommends python3-doc\n\n  $ ls -la /usr/share/doc",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 \u201cquoted\u201d text, 12345678 and 3.14159\t\ttabs",
    "\u4e2d\u6587\u5b57\u7b26 and emoji \U0001F600 mixed   with   spaces   \n",
]


def bytes_to_unicode():
    """GPT-2's byte <-> printable-character table used by tokenizers' ByteLevel."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def read_docs(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [d for d in fh.read().split(DOC_SEP) if d.strip()]


def train_merges(docs, n_ranks):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    try:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(K3_PAT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.pre_tokenizer.pre_tokenize_str("Hello world, it's 2024!")
        pretok = "K3 pattern (Split) + ByteLevel"
    except Exception as e:  # noqa: BLE001 - Oniguruma may not take the pattern; GPT-2's split is close
        print(f"tok_train: K3 pattern not accepted by tokenizers ({e}); using ByteLevel's own split", flush=True)
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        pretok = "ByteLevel (GPT-2 split)"
    trainer = trainers.BpeTrainer(vocab_size=n_ranks + 64, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(docs, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return merges, pretok


def ranks_from_merges(merges, n_ranks):
    dec = {c: b for b, c in bytes_to_unicode().items()}
    to_bytes = lambda s: bytes(dec[ch] for ch in s)
    ranks = {bytes([b]): b for b in range(256)}
    for a, b in merges:
        if len(ranks) == n_ranks:
            break
        t = to_bytes(a) + to_bytes(b)
        if t not in ranks:
            ranks[t] = len(ranks)
    if len(ranks) != n_ranks:
        raise RuntimeError(f"only {len(ranks)} ranks from {len(merges)} merges; need {n_ranks}")
    return ranks


def write_files(out, ranks):
    with open(os.path.join(out, "tiktoken.model"), "w") as fh:
        for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            fh.write(f"{base64.b64encode(t).decode()} {r}\n")
    n = len(ranks)
    added = {}
    for i in range(N_SPECIAL):
        added[str(n + i)] = {"content": K3_SPECIALS.get(i, f"<|reserved_token_{n + i}|>"), "lstrip": False,
                             "normalized": False, "rstrip": False, "single_word": False, "special": True}
    cfg = {"added_tokens_decoder": added, "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]",
           "unk_token": "[UNK]", "model_max_length": 1048576, "tokenizer_class": "TikTokenTokenizer",
           "comment": "sluice default model tokenizer: byte-level BPE on the tools/train corpus, Kimi K3 layout"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=4096)
    args = ap.parse_args()
    import numpy as np
    import tiktoken
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    train_docs = read_docs(os.path.join(args.corpus, "train.txt.gz"))
    val_docs = read_docs(os.path.join(args.corpus, "val.txt.gz"))
    merges, pretok = train_merges(train_docs, args.ranks)
    ranks = ranks_from_merges(merges, args.ranks)
    write_files(args.out, ranks)
    print(f"tok_train: {len(ranks)} ranks from {len(merges)} merges ({pretok}) in {time.time() - t0:.1f} s", flush=True)

    # Re-read the rank file as the engine does, and encode with the engine's pattern.
    loaded = {}
    with open(os.path.join(args.out, "tiktoken.model")) as fh:
        for i, line in enumerate(fh):
            b64, r = line.split()
            assert int(r) == i, (i, r)
            loaded[base64.b64decode(b64)] = int(r)
    assert loaded == ranks
    enc = tiktoken.Encoding(name="sluice_default", pat_str=K3_PAT, mergeable_ranks=loaded, special_tokens={})
    stats = {"ranks": len(ranks), "merges_trained": len(merges), "pre_tokenizer_for_training": pretok}
    for name, docs in (("train", train_docs), ("val", val_docs)):
        t1 = time.time()
        pieces = enc.encode_ordinary_batch([d + "\n\n" for d in docs], num_threads=16)
        ids = np.fromiter((i for p in pieces for i in p), dtype=np.int32)
        ids.tofile(os.path.join(args.out, f"{name}.bin"))
        chars = sum(len(d) + 2 for d in docs)
        stats[f"{name}_tokens"] = int(ids.size)
        stats[f"{name}_chars"] = chars
        print(f"tok_train: {name}: {ids.size} tokens, {chars / max(ids.size, 1):.2f} chars/token, "
              f"{time.time() - t1:.1f} s", flush=True)
    val_text = DOC_SEP.join(val_docs)
    ok = enc.decode(enc.encode_ordinary(val_text)) == val_text
    ok_bytes = all(enc.decode_bytes(enc.encode_ordinary(line)) == line.encode() for line in CASE_LINES)
    stats["val_round_trip"] = bool(ok and ok_bytes)
    print(f"tok_train: round trip of the validation text ({len(val_text)} chars): {'OK' if ok else 'FAILED'}; "
          f"case lines: {'OK' if ok_bytes else 'FAILED'}", flush=True)
    cases = [{"text": line, "ids": enc.encode_ordinary(line)} for line in CASE_LINES]
    cases += [{"text": d[:300], "ids": enc.encode_ordinary(d[:300])} for d in val_docs[:3]]
    with open(os.path.join(args.out, "tokenizer_cases.json"), "w") as fh:
        json.dump({"pattern": "kimi_k3", "cases": cases}, fh, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "tokenizer_stats.json"), "w") as fh:
        json.dump(stats, fh, indent=2)
    if not stats["val_round_trip"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
