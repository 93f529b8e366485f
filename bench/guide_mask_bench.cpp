// Token-mask cost at a 160k vocabulary in three JSON states: inside a string value (almost every
// token allowed), where an object key's opening quote is due (few allowed), and inside a number.
// A fourth state is string contents under maxLength. Each is timed three ways: with a fresh
// MaskCache per call (the first mask in a state never seen: a walk that learns every transition),
// asked again with the same cache (the state's mask is memoized: a copy), and writing on: a decode
// appending a word token 32 times, a mask before each (inside an unbounded string the state comes
// back after each word, so memo hits; under maxLength each length is a new state, so walks over
// transitions mostly learnt).
//
// usage: [SLUICE_MASK_PARTS=N] guide_mask_bench [tokenizer.json]
// Without an argument the vocabulary is synthetic: 160k distinct byte strings of 1-16 bytes cut
// from English-like words, numbers, whitespace runs and JSON punctuation, plus all 256 single
// bytes and some non-ASCII text. With a byte-level BPE tokenizer.json (GPT-2 byte mapping), its
// vocabulary and added tokens (as specials) are measured too.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "guide/json_schema.h"
#include "guide/token_mask.h"

namespace {

using sluice::guide::Grammar;
using sluice::guide::MaskCache;
using sluice::guide::Matcher;
using sluice::guide::Vocabulary;

struct Vocab {
  std::vector<std::string> text;
  std::vector<bool> special;
};

Vocab synthetic_vocab(size_t n) {
  std::mt19937_64 rng(42);
  const char* syllables[] = {"th", "e",  "an", "in", "er", "on", "re", "at", "en", "nd", "st", "or", "es", "ti",
                             "ing", "ou", "al", "it", "is", "ar", "le", "ed", "co", "de", "pro", "com", "con", "ion",
                             "ment", "ly", "ter", "ver", "per", "ch", "sh", "qu", "ph", "ble", "tion", "ous", "ful",
                             "a",  "o",  "u",  "i",  "y",  "s",  "t",  "n",  "m",  "p",  "b",  "k",  "g",  "w"};
  std::vector<std::string> words;
  for (int i = 0; i < 30000; ++i) {
    std::string w;
    const int k = 1 + int(rng() % 4);
    for (int j = 0; j < k; ++j) w += syllables[rng() % std::size(syllables)];
    if (rng() % 8 == 0) w[0] = char(w[0] - 'a' + 'A');
    words.push_back(w);
  }
  const char* punct[] = {"\"", "\":", "\",", "{\"", "\"}", "\":\"", "\",\"", "},", "],", "[{", "}]", "\": ",
                         ", \"", "\\n", "\\\"", "\\u", ".", ",", ":", ";", "(", ")", "!", "?", "-", "'", "/",
                         "{", "}", "[", "]", "\n", "\n\n", "  ", "    ", "\t", "=", "_", "*", "#", "<", ">"};
  const char* utf8[] = {"é", "è", "ü", "ö", "ñ", "ç", "ß", "€", "—", "’", "“", "”", "中", "文", "日本", "한", "я", "д",
                        "\xC3", "\xA9", "\xE2\x80", "\x99", "\xF0\x9F", "\x98\x80", "😀"};
  std::set<std::string> seen;
  Vocab v;
  auto add = [&](std::string t) {
    if (t.empty() || t.size() > 16 || !seen.insert(t).second) return;
    v.text.push_back(std::move(t));
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, char(b)));
  while (v.text.size() < n) {
    const int kind = int(rng() % 20);
    std::string t;
    if (kind < 10) {
      const std::string& w = words[rng() % words.size()];
      t = (rng() % 2 ? " " : "") + w.substr(0, 1 + rng() % w.size());
    } else if (kind < 13) {
      t = words[rng() % words.size()] + words[rng() % words.size()];
    } else if (kind < 15) {
      t = std::to_string(rng() % 1000);
    } else if (kind < 18) {
      t = std::string(punct[rng() % std::size(punct)]) + (rng() % 2 ? words[rng() % words.size()] : "");
    } else {
      t = std::string(utf8[rng() % std::size(utf8)]) + (rng() % 2 ? utf8[rng() % std::size(utf8)] : "");
    }
    add(t);
  }
  v.special.assign(v.text.size(), false);
  return v;
}

// GPT-2's byte-level BPE writes each byte as a printable code point; this undoes it.
Vocab bpe_vocab(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json tok = nlohmann::json::parse(in);
  std::vector<int> unicode_to_byte(512, -1);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    unicode_to_byte[printable ? b : 256 + extra++] = b;
  }
  Vocab v;
  auto put = [&](size_t id, std::string bytes, bool special) {
    if (v.text.size() <= id) {
      v.text.resize(id + 1);
      v.special.resize(id + 1, false);
    }
    v.text[id] = std::move(bytes);
    v.special[id] = special;
  };
  for (auto& [piece, id] : tok["model"]["vocab"].items()) {
    std::string bytes;
    for (size_t i = 0; i < piece.size();) {
      const uint8_t c = uint8_t(piece[i]);
      uint32_t cp = c;
      int n = 1;
      if (c >= 0xC0) {
        n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        cp = c & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(piece[i + size_t(k)]) & 0x3F);
      }
      i += size_t(n);
      bytes += char(cp < 512 && unicode_to_byte[cp] >= 0 ? unicode_to_byte[cp] : '?');
    }
    put(id.get<size_t>(), bytes, false);
  }
  for (const auto& a : tok["added_tokens"]) put(a["id"].get<size_t>(), a["content"].get<std::string>(), true);
  return v;
}

double ms_per_mask(const Vocabulary& vocab, const Matcher& m, bool reuse, int* allowed) {
  std::vector<uint64_t> bits;
  MaskCache cache;
  if (reuse) vocab.allowed(m, bits, cache);  // warm
  const int iters = 20;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (!reuse) cache.clear();
    vocab.allowed(m, bits, cache);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
  *allowed = 0;
  for (uint64_t w : bits) *allowed += __builtin_popcountll(w);
  return ms;
}

// Mean ms per mask while appending `word` (a token's id) 32 times from m, walking in `parts`
// shares, one ParallelMasks throughout (warmed by m's own mask first, as a decode's caches are);
// -1 when the word is not allowed there.
double ms_writing_on(const std::shared_ptr<const Vocabulary>& vocab, Matcher m, int32_t word, int parts) {
  std::vector<uint64_t> bits;
  sluice::guide::ParallelMasks masks(vocab, parts);
  masks.allowed(m, bits);
  const int steps = 32;
  double ms = 0;
  for (int i = 0; i < steps; ++i) {
    if (!vocab->accept(m, word)) return -1;
    const auto t0 = std::chrono::steady_clock::now();
    masks.allowed(m, bits);
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return ms / steps;
}

void run(const char* name, const Vocab& v, int parts) {
  std::vector<std::string_view> views(v.text.begin(), v.text.end());
  const auto t0 = std::chrono::steady_clock::now();
  const auto shared = std::make_shared<const Vocabulary>(views, v.special);
  const Vocabulary& vocab = *shared;
  const double build = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %d tokens, %zu trie nodes, built in %.1f ms\n", name, vocab.size(), vocab.nodes(), build);
  int32_t word = -1;  // the token " the", or the first token of lowercase letters
  for (int32_t id = 0; id < vocab.size() && word < 0; ++id)
    if (!vocab.special(id) && vocab.bytes(id) == " the") word = id;
  for (int32_t id = 0; id < vocab.size() && word < 0; ++id) {
    const std::string_view b = vocab.bytes(id);
    if (!vocab.special(id) && b.size() > 1 && b.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == b.npos) word = id;
  }
  auto g = std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar());
  const struct {
    const char* state;
    const char* prefix;
  } states[] = {
      {"(a) string contents", "{\"note\": \"The quick brown fox"},
      {"(b) key expected", "{\"a\": 1,"},
      {"(c) number", "{\"a\": 12"},
      {"(d) maxLength 200", "{\"note\": \"The quick brown fox"},
  };
  // Bounded lengths count characters in the recognizer state, so each position is a new state.
  auto bounded = std::make_shared<const Grammar>(sluice::guide::json_schema_grammar(nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"note": {"type": "string", "maxLength": 200}}})")));
  for (const auto& s : states) {
    const bool last = &s == &states[std::size(states) - 1];
    Matcher m(last ? bounded : g);
    if (!m.accept_bytes(s.prefix)) std::printf("  bad prefix %s\n", s.prefix);
    int allowed_cold = 0, allowed_warm = 0;
    const double cold = ms_per_mask(vocab, m, false, &allowed_cold);
    const double warm = ms_per_mask(vocab, m, true, &allowed_warm);
    const double on = word >= 0 ? ms_writing_on(shared, m, word, 1) : -1;
    const double on_parts = word >= 0 ? ms_writing_on(shared, m, word, parts) : -1;
    std::printf("  %-22s %7d allowed   first %6.3f   again %6.4f   ", s.state, allowed_warm, cold, warm);
    if (on >= 0) std::printf("writing on %6.4f, in %d shares %6.4f ms/mask\n", on, parts, on_parts);
    else std::printf("writing on: -\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The parallel column's shares: SLUICE_MASK_PARTS, else this machine's default at 160k tokens.
  const int parts = sluice::guide::default_mask_parts(size_t(1) << 20);
  std::printf("ms per mask: first (a fresh cache), again (the same state: memoized), writing on (32 word tokens)\n");
  run("synthetic", synthetic_vocab(160000), parts);
  if (argc > 1) run(argv[1], bpe_vocab(argv[1]), parts);
  return 0;
}
