// libFuzzer target for the GGUF exporter's vocabulary (issue 20: the GGUF writer's inputs): a
// tiktoken rank file built from the input (the 256 single bytes, then the input's 0xFF-separated
// pieces as merged tokens in that order, reachable by BPE or not, plus specials) must either be
// refused by the loader or give a vocabulary whose every normal token spells its bytes through
// bytes_to_unicode and back, whose spellings are unique, and whose merges join two tokens of lower
// rank into the token of each merge's rank. Raw input must round-trip bytes_to_unicode.
// fuzz-sources: src/export/gguf_vocab.cpp
// fuzz-sources: src/tokenizer/utf8.cpp src/tokenizer/byte_pair.cpp src/tokenizer/regex_splitter.cpp
// fuzz-sources: src/tokenizer/tiktoken_bpe.cpp src/tokenizer/token_table.cpp src/tokenizer/hf_tokenizer.cpp
// fuzz-sources: src/tokenizer/unicode_nfc.cpp src/tokenizer/unicode_nfc_data.cpp
// fuzz-sources: src/format/json_util.cpp
// fuzz-libs: -lpcre2-8
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_b64.h"
#include "export/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace {
using namespace sluice;

void check(bool ok) {
  if (!ok) std::abort();
}

using fuzz::b64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string back;
  check(gguf::unicode_to_bytes(gguf::bytes_to_unicode(input), &back) && back == input);
  if (size > 4096) return 0;

  // Rank file: single bytes first (ranks 0..255), then each new piece.
  std::vector<std::string> pieces;
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(std::string(1, char(b)));
    seen.insert(pieces.back());
  }
  size_t start = 0;
  for (size_t i = 0; i <= input.size(); ++i) {
    if (i < input.size() && uint8_t(input[i]) != 0xFF) continue;
    std::string p = input.substr(start, i - start);
    if (p.size() > 1 && seen.insert(p).second) pieces.push_back(p);
    start = i + 1;
  }
  std::string ranks;
  for (size_t r = 0; r < pieces.size(); ++r) ranks += b64(pieces[r]) + " " + std::to_string(r) + "\n";
  tokenizer::TiktokenOptions opt;
  const int32_t n = int32_t(pieces.size());
  const int extra = size ? data[0] % 8 : 0;
  if (extra >= 2) opt.specials = {{n, "<|open|>", true}, {n + extra - 1, "<|close|>", true}};
  std::unique_ptr<tokenizer::Tokenizer> tok;
  try {
    tok = tokenizer::load_tiktoken_bytes(ranks, "fuzz.tiktoken", opt);
  } catch (const Error&) {
    return 0;
  }
  const int64_t vocab = int64_t(n) + extra;
  gguf::GgufVocab v;
  try {
    v = gguf::build_vocab(*tok, vocab);
  } catch (const Error&) {
    return 0;  // e.g. two ids that would get one spelling
  }
  check(int64_t(v.tokens.size()) == vocab && v.types.size() == v.tokens.size());
  std::map<std::string, int64_t> id_of;
  for (int64_t id = 0; id < vocab; ++id) {
    check(id_of.emplace(v.tokens[size_t(id)], id).second);  // unique spellings
    const int32_t t = v.types[size_t(id)];
    check(t == gguf::kTokenNormal || t == gguf::kTokenControl || t == gguf::kTokenUnused);
    if (t == gguf::kTokenNormal) {
      check(id < n);
      std::string bytes;
      check(gguf::unicode_to_bytes(v.tokens[size_t(id)], &bytes) && bytes == pieces[size_t(id)]);
    }
  }
  int64_t last = -1;
  for (const std::string& m : v.merges) {
    const size_t space = m.find(' ');
    check(space != std::string::npos && m.find(' ', space + 1) == std::string::npos);
    auto a = id_of.find(m.substr(0, space)), b = id_of.find(m.substr(space + 1));
    check(a != id_of.end() && b != id_of.end());
    std::string ab, bb;
    check(gguf::unicode_to_bytes(a->first, &ab) && gguf::unicode_to_bytes(b->first, &bb));
    auto whole = id_of.find(gguf::bytes_to_unicode(ab + bb));
    check(whole != id_of.end());
    check(a->second < whole->second && b->second < whole->second);  // parts rank below the merge
    check(whole->second > last);                                     // merges in rank order
    last = whole->second;
  }
  return 0;
}
