#!/usr/bin/env python3
# Turns the oracle run's output (oracle.py OUT_DIR) into the small committed fixtures under
# tests/fixtures/tokenizer/: per-document id counts and 64-bit FNV-1a hashes of the ids for every
# encoding, a few documents' ids in full, TestPlans, edge cases, Qwen3 chat renders, and timings.
# Usage: pack_fixtures.py ORACLE_OUT_DIR CORPUS_JSONL FIXTURE_DIR
import array
import json
import lzma
import os
import sys

src, corpus_path, dst = sys.argv[1], sys.argv[2], sys.argv[3]
results = json.load(open(os.path.join(src, "results.json"), encoding="utf-8"))
ENCODINGS = ["cl100k_base", "o200k_base", "k3_o200k", "qwen3", "deepseek_v3"]
FULL_DOCS = 3


def fnv1a_ids(ids):
    """FNV-1a over the ids' 32-bit little-endian bytes (the same function the C++ test uses)."""
    h = 0xCBF29CE484222325
    for i in ids:
        for b in (i & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


lines = []
full = {}
for name in ENCODINGS:
    data = array.array("i")
    with open(os.path.join(src, f"ids_{name}.bin"), "rb") as f:
        data.frombytes(f.read())
    pos, doc = 0, 0
    full[name] = []
    while pos < len(data):
        n = data[pos]
        ids = data[pos + 1:pos + 1 + n].tolist()
        pos += 1 + n
        lines.append(f"{name}\t{doc}\t{n}\t{fnv1a_ids(ids):016x}")
        if doc < FULL_DOCS:
            full[name].append(ids)
        doc += 1
with open(os.path.join(dst, "corpus_expected.tsv"), "w") as f:
    f.write("# encoding\tdocument\tid_count\tfnv1a64_of_ids (made by tools/tokenizer/pack_fixtures.py)\n")
    f.write("\n".join(lines) + "\n")
with open(os.path.join(dst, "corpus_full_ids.json"), "w") as f:
    json.dump(full, f, separators=(",", ":"))
with lzma.open(os.path.join(dst, "corpus.jsonl.xz"), "wb", preset=9) as f:
    f.write(open(corpus_path, "rb").read())
plans = [{"encoding": p["encoding"], "sample": p["sample"], "ids": p["tiktoken_ids"]} for p in results["testplans"]]
assert all(p["file_ids"] == p["tiktoken_ids"] for p in results["testplans"])
json.dump(plans, open(os.path.join(dst, "testplans.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=0)
json.dump(results["edge"], open(os.path.join(dst, "edge_cases.json"), "w", encoding="utf-8"), ensure_ascii=True,
          separators=(",", ":"))
json.dump([{"text": r["text"], "ids": r["ids"]} for r in results["qwen3_chat"]],
          open(os.path.join(dst, "qwen3_chat_expected.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=0)
json.dump({"versions": results["versions"], "corpus": results["corpus"], "timing": results["timing"],
           "patterns": results["patterns"],
           "transformers_agrees": [r.get("transformers_agrees") for r in results["qwen3_chat"]]},
          open(os.path.join(dst, "oracle_summary.json"), "w"), indent=1)
print("packed", len(lines), "document hashes", file=sys.stderr)
