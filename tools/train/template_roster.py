"""Copies a make-tiny checkpoint's config files into a template folder, with the default tokenizer's
special ids ([BOS] 4096, <|end_of_msg|> 4098 = eos, [PAD] 4351), and writes tensors.json: for each
safetensors file its tensors as [name, dtype, shape] in file order. Plain Python (no torch needed).
Usage: python3 template_roster.py CKPT_DIR TEMPLATE_DIR"""
import glob
import json
import os
import struct
import sys

BOS, EOS, PAD = 4096, 4098, 4351


def header(path):
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n))
    h.pop("__metadata__", None)
    items = sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return [[k, v["dtype"], v["shape"]] for k, v in items]


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as fh:
        cfg = json.load(fh)
    for c in (cfg, cfg["text_config"]):
        c["bos_token_id"], c["eos_token_id"], c["pad_token_id"] = BOS, EOS, PAD
    with open(os.path.join(dst, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(dst, "generation_config.json"), "w") as fh:
        json.dump({"bos_token_id": BOS, "eos_token_id": EOS}, fh, indent=2)
        fh.write("\n")
    files = sorted(glob.glob(os.path.join(src, "*.safetensors")))
    roster = {"files": {os.path.basename(f): header(f) for f in files},
              "index": os.path.exists(os.path.join(src, "model.safetensors.index.json"))}
    with open(os.path.join(dst, "tensors.json"), "w") as fh:
        json.dump(roster, fh)
    print(f"{dst}: {sum(len(v) for v in roster['files'].values())} tensors in {len(files)} files")


if __name__ == "__main__":
    main()
