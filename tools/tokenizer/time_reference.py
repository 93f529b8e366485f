#!/usr/bin/env python3
# Same-machine reference speeds for tools/tokenizer/encode_speed.cpp: single-thread tiktoken and
# Hugging Face tokenizers encode MB/s on the parity corpus, best of N passes, printed as JSON.
# Usage: time_reference.py DATA_DIR [PASSES]   (DATA_DIR laid out like scripts/fetch-tokenizer-data.sh's)
import base64
import json
import os
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
d = sys.argv[1]
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def ranks(path):
    out = {}
    for line in open(path, "rb"):
        if line.strip():
            t, r = line.split()
            out[base64.b64decode(t)] = int(r)
    return out


o200k, cl100k = ranks(f"{d}/o200k_base.tiktoken"), ranks(f"{d}/cl100k_base.tiktoken")
PATS = json.load(open(f"{d}/patterns.json"))
k3 = tiktoken.Encoding(name="k3", pat_str=PATS["k3_o200k"], mergeable_ranks=o200k, special_tokens={})


def k3_encode(s):
    ids = []
    for i in range(0, len(s), 400_000):
        part = s[i:i + 400_000]
        run, sp, start = 0, part[:1].isspace(), 0
        for j, ch in enumerate(part):
            now = ch.isspace()
            if sp ^ now:
                run, sp = 1, now
            else:
                run += 1
                if run > 25_000:
                    ids += k3.encode_ordinary(part[start:j])
                    start, run = j, 1
        ids += k3.encode_ordinary(part[start:])
    return ids


encs = {
    "cl100k_base": tiktoken.Encoding(name="cl", pat_str=PATS["cl100k_base"], mergeable_ranks=cl100k,
                                     special_tokens={}).encode_ordinary,
    "o200k_base": tiktoken.Encoding(name="o2", pat_str=PATS["o200k_base"], mergeable_ranks=o200k,
                                    special_tokens={}).encode_ordinary,
    "k3_o200k": k3_encode,
}
for name in ("qwen3", "deepseek_v3"):
    tok = tokenizers.Tokenizer.from_file(f"{d}/{name}/tokenizer.json")
    encs[name] = (lambda t: lambda s: t.encode(s, add_special_tokens=False).ids)(tok)
docs = [json.loads(line) for line in open(f"{d}/corpus.jsonl", encoding="ascii")]
nbytes = sum(len(x.encode()) for x in docs)
out = {}
for name, enc in encs.items():
    best = min((lambda t0: ([enc(x) for x in docs], time.perf_counter() - t0)[1])(time.perf_counter())
               for _ in range(passes))
    out[name] = {"seconds": best, "mb_per_s": nbytes / best / 1e6}
print(json.dumps(out))
