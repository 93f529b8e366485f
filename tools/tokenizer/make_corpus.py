#!/usr/bin/env python3
# Builds the tokenizer parity corpus (>= 2 MB of varied text) from material on a Debian machine plus
# generated CJK / emoji / whitespace / digit / mixed-script text; writes one JSON string per line
# (ASCII-escaped), each line one document that the oracles and our encoders encode as a whole.
import glob
import gzip
import json
import os
import random
import sys

# Spellings that Hugging Face tokenizers would recognise as added tokens inside ordinary text; the
# corpus must not contain them, since our encode never recognises specials.
FORBIDDEN = ["<|", "|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
             "</tool_response>", "<｜", "｜>"]

rng = random.Random(20261202)


def read_text(path):
    try:
        raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def clean(text):
    for bad in FORBIDDEN:
        text = text.replace(bad, "<")
    return text.replace("\ud800", "")


def docs_from(text, size):
    """Cuts text at line boundaries into documents of about `size` characters."""
    lines = text.splitlines(keepends=True)
    cur = []
    n = 0
    for line in lines:
        cur.append(line)
        n += len(line)
        if n >= size:
            yield "".join(cur)
            cur, n = [], 0
    if cur:
        yield "".join(cur)


def pick_files(patterns, limit_bytes):
    files = sorted(set(f for p in patterns for f in glob.glob(p, recursive=True)))
    rng.shuffle(files)
    out, total = [], 0
    for f in files:
        t = read_text(f)
        if not t or len(t) < 200:
            continue
        t = t[:60000]
        out.append(t)
        total += len(t.encode())
        if total >= limit_bytes:
            break
    return out


def rand_chars(ranges, n):
    return "".join(chr(rng.randint(a, b)) for _ in range(n) for a, b in [rng.choice(ranges)])


EMOJI = ["😀", "😂", "🤣", "😍", "🙂", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🇯🇵", "🇫🇷", "🇺🇸", "❤️", "✨", "🔥",
         "🎉", "🚀", "🌍", "☕", "🍣", "🐍", "🦀", "⭐️", "🏳️‍🌈", "🧑🏿‍🔬", "✅", "❌", "©️", "™", "🤖"]
WORDS = {
    "ru": "привет мир как дела это тест токенизатора Москва Россия язык программирования",
    "el": "καλημέρα κόσμε αυτό είναι ένα τεστ γλώσσα Ελλάδα Αθήνα",
    "ar": "مرحبا بالعالم هذا اختبار اللغة العربية المملكة",
    "he": "שלום עולם זה מבחן שפה עברית ירושלים",
    "hi": "नमस्ते दुनिया यह एक परीक्षण है भाषा भारत",
    "th": "สวัสดีชาวโลก นี่คือการทดสอบ ภาษาไทย",
    "ko": "안녕하세요 세상 이것은 테스트입니다 한국어",
    "ja": "こんにちは世界 これはテストです 日本語の文章 カタカナ ひらがな",
    "zh": "你好世界 这是一个测试 中文分词 北京 上海 人工智能",
    "vi": "Xin chào thế giới đây là bài kiểm tra tiếng Việt",
    "tr": "Merhaba dünya bu bir test İstanbul ığdır şçöü",
    "de": "Grüße aus Köln Straße Maß Übergröße ÄÖÜ",
}
WS = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "   \n", "\u00a0", "\u3000", "\u2009", "\u2028", "\x0b", "\x0c",
      "\x1c", "\x1f", "\x85", " \t \n", "\u200b"]
# Decomposed (NFD) accents and stray combining marks exercise the NFC normaliser of Qwen3.
COMBINING = ["e\u0301", "A\u030a", "n\u0303", "o\u0308\u0304", "\u0301", "a\u0323\u0302", "\u1100\u1161\u11a8",
             "Å", "ﬁ", "Ω", "\u0915\u093c", "é", "\u0041\u0300\u0316"]


def gen_mixed(n_chars):
    parts = []
    while sum(map(len, parts)) < n_chars:
        kind = rng.randrange(10)
        if kind == 0:
            parts.append(rand_chars([(0x4E00, 0x9FA5)], rng.randint(1, 40)))
        elif kind == 1:
            parts.append(rand_chars([(0x3041, 0x3093), (0x30A1, 0x30F6)], rng.randint(1, 20)))
        elif kind == 2:
            parts.append(rand_chars([(0xAC00, 0xD7A3)], rng.randint(1, 12)))
        elif kind == 3:
            parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 6))))
        elif kind == 4:
            parts.append("".join(rng.choice(WS) for _ in range(rng.randint(1, 8))))
        elif kind == 5:
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 30)))
            parts.append(rng.choice(["", " ", "$", "-", "+", "#"]) + digits + rng.choice(["", ".5", ",000", "%", "e-3"]))
        elif kind == 6:
            lang = rng.choice(list(WORDS))
            words = WORDS[lang].split()
            parts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 10))))
        elif kind == 7:
            parts.append(rng.choice(COMBINING) * rng.randint(1, 3))
        elif kind == 8:
            parts.append(rng.choice(["I'm", "YOU'LL", "he's", "They'VE", "we'D", "it'S", "don't", "'ſ", "O'Neil",
                                     "can't", "'re", "rock'n'roll", "MAX'S"]))
        else:
            parts.append(rand_chars([(0x21, 0x7E), (0xA1, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x2000, 0x206F),
                                     (0x2190, 0x22FF), (0xFF01, 0xFF5E)], rng.randint(1, 12)))
        if rng.random() < 0.5:
            parts.append(" ")
    return "".join(parts)


def main(out_path):
    docs = []
    prose = pick_files(["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright", "/usr/share/doc/*/README*",
                        "/usr/share/doc/*/changelog*.gz", "/usr/share/doc/*/NEWS*"], 1_000_000)
    code = pick_files(["/usr/lib/python3*/*.py", "/usr/lib/python3*/*/*.py", "/usr/include/*.h",
                       "/usr/include/*/*.h", "/usr/share/perl5/**/*.pm"], 700_000)
    for text in prose + code:
        docs.extend(docs_from(text, rng.randint(1500, 6000)))
    for _ in range(160):
        docs.append(gen_mixed(rng.randint(800, 3000)))
    # Long whitespace runs, long digit runs, tabs in code, a very long homogeneous run (K3 cuts at 25,000).
    docs.append(" " * 3000 + "x" + "\n" * 500 + "\t" * 300 + "end")
    docs.append("1234567890" * 400)
    docs.append("".join(rng.choice("abcdefghij") for _ in range(26000)) + " tail")
    docs.append(" " * 26000 + "word" + "\u3000" * 100)
    docs.append("Ab" * 1000 + "\r\n" * 100 + "!?" * 500)
    docs = [clean(d) for d in docs if d]
    rng.shuffle(docs)
    with open(out_path, "w", encoding="ascii") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=True) + "\n")
    total = sum(len(d.encode()) for d in docs)
    print(f"{out_path}: {len(docs)} documents, {total} UTF-8 bytes", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "corpus.jsonl")
