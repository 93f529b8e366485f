"""Builds the plain-text corpus of the default model pair from the sources make_corpus.sh installs.
Documents: one per Bible chapter (verse numbers dropped, one verse a line), one per Debian Reference
chapter, one per Python documentation page (HTML main body to text). About 1 in 33 documents,
chosen by a hash of its title, is held out for validation. Writes train.txt.gz and val.txt.gz
(documents separated by a blank line and a form feed line) and corpus_stats.json."""
import argparse
import gzip
import hashlib
import html.parser
import json
import os
import re

DOC_SEP = "\n\f\n"


class MainText(html.parser.HTMLParser):
    """Text of a Sphinx page's <div role="main">, block elements on their own lines."""
    BLOCK = {"p", "div", "pre", "li", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "br", "tr", "table",
             "section", "blockquote", "ul", "ol", "dl"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0          # div depth inside the main div (0 = outside)
        self.skip = 0
        self.pre = 0
        self.parts = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div":
            if self.depth:
                self.depth += 1
            elif a.get("role") == "main":
                self.depth = 1
        if not self.depth:
            return
        if tag in ("script", "style") or (tag == "a" and "headerlink" in (a.get("class") or "")):
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if not self.depth:
            return
        if tag in ("script", "style") or (tag == "a" and self.skip):
            self.skip = max(0, self.skip - 1)
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in self.BLOCK:
            self.parts.append("\n")
        if tag == "div":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))

    def text(self):
        t = "".join(self.parts).replace("\u00b6", "")
        lines = [ln.rstrip() for ln in t.split("\n")]
        t = "\n".join(lines)
        return re.sub(r"\n{3,}", "\n\n", t).strip()


def kjv_docs(path):
    docs, title, verses = [], None, []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = re.match(r"^\s+\d+ (.*)$", line)
            if m:
                verses.append(m.group(1).strip())
            elif line.strip():
                if title and verses:
                    docs.append((f"kjv:{title}", title + "\n\n" + "\n".join(verses)))
                title, verses = line.strip(), []
    if title and verses:
        docs.append((f"kjv:{title}", title + "\n\n" + "\n".join(verses)))
    return docs


def debref_docs(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    chunks = re.split(r"\n(?=Chapter\s\d+\.\s)", text)
    return [(f"debref:{i}", re.sub(r"\n{3,}", "\n\n", c).strip()) for i, c in enumerate(chunks) if c.strip()]


def pydoc_docs(root):
    docs = []
    for d, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if not f.endswith(".html") or f in ("genindex.html", "search.html", "py-modindex.html"):
                continue
            if "genindex" in f or "whatsnew" in d:
                continue
            p = MainText()
            with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                p.feed(fh.read())
            t = p.text()
            if len(t) > 200:
                docs.append((f"pydoc:{os.path.relpath(os.path.join(d, f), root)}", t))
    return docs


def held_out(key):
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 33 == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kjv", required=True)
    ap.add_argument("--debref", required=True)
    ap.add_argument("--pydoc", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sources = {"kjv": kjv_docs(args.kjv), "debian-reference": debref_docs(args.debref),
               "python-doc": pydoc_docs(args.pydoc)}
    train, val, stats = [], [], {}
    for name, docs in sources.items():
        n_val = 0
        for key, text in docs:
            text = text.replace("\f", "")
            (val if held_out(key) else train).append(text)
            n_val += held_out(key)
        stats[name] = {"documents": len(docs), "held_out": n_val, "chars": sum(len(t) for _, t in docs)}
    os.makedirs(args.out, exist_ok=True)
    for fname, docs in (("train.txt.gz", train), ("val.txt.gz", val)):
        with gzip.open(os.path.join(args.out, fname), "wt", encoding="utf-8", compresslevel=9) as fh:
            fh.write(DOC_SEP.join(docs) + "\n")
    stats["train_chars"] = sum(len(t) for t in train)
    stats["val_chars"] = sum(len(t) for t in val)
    with open(os.path.join(args.out, "corpus_stats.json"), "w") as fh:
        json.dump(stats, fh, indent=2)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
