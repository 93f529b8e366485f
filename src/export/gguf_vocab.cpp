// bytes_to_unicode and the merge rebuild. The merge of rank r replays BPE over the token's bytes
// with only ranks below r allowed (always merging the lowest-ranked adjacent pair), as llama.cpp's
// converter does for tiktoken vocabularies.
#include "export/gguf_vocab.h"

#include <array>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/utf8_encode.h"

namespace sluice::gguf {
namespace {

// Byte -> code point: printable Latin-1 bytes map to themselves, the rest to 256 + n in byte order.
const std::array<uint32_t, 256>& byte_code_points() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) t[size_t(b)] = printable(b) ? uint32_t(b) : next++;
    return t;
  }();
  return table;
}

// BPE over `token` allowing only ranks below `max_rank`; returns the parts.
std::vector<std::string_view> bpe_parts(const std::unordered_map<std::string_view, int64_t>& ranks, std::string_view token,
                                        int64_t max_rank) {
  std::vector<std::string_view> parts;
  for (size_t i = 0; i < token.size(); ++i) parts.push_back(token.substr(i, 1));
  for (;;) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      std::string_view joined(parts[i].data(), parts[i].size() + parts[i + 1].size());
      auto it = ranks.find(joined);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best >= max_rank) break;
    parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
    parts.erase(parts.begin() + int64_t(at) + 1);
  }
  return parts;
}

}  // namespace

std::string bytes_to_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_code_points()[b]);
  return out;
}

bool unicode_to_bytes(std::string_view text, std::string* bytes) {
  static const std::unordered_map<uint32_t, uint8_t> inverse = [] {
    std::unordered_map<uint32_t, uint8_t> m;
    for (int b = 0; b < 256; ++b) m[byte_code_points()[size_t(b)]] = uint8_t(b);
    return m;
  }();
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    size_t n;
    if (c < 0x80) cp = c, n = 1;
    else if ((c & 0xE0) == 0xC0) cp = c & 0x1F, n = 2;
    else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, n = 3;
    else return false;
    if (i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    auto it = inverse.find(cp);
    if (it == inverse.end()) return false;
    *bytes += char(it->second);
    i += n;
  }
  return true;
}

GgufVocab build_vocab(const tokenizer::Tokenizer& tok, int64_t vocab_size) {
  SLUICE_CHECK(tok.vocab_size() <= vocab_size, "the tokenizer has ", tok.vocab_size(),
               " ids, more than the model's vocab_size ", vocab_size);
  std::vector<bool> special(size_t(vocab_size), false);
  GgufVocab v;
  v.tokens.resize(size_t(vocab_size));
  v.types.assign(size_t(vocab_size), kTokenUnused);
  for (const tokenizer::SpecialToken& s : tok.special_tokens()) {
    special[size_t(s.id)] = true;
    v.tokens[size_t(s.id)] = s.spelling;
    v.types[size_t(s.id)] = kTokenControl;
  }
  // Ordinary ids are the ranks.
  std::unordered_map<std::string_view, int64_t> ranks;
  std::vector<std::pair<int64_t, std::string_view>> ordinary;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (special[size_t(id)]) continue;
    std::string_view b;
    try {
      b = tok.token_bytes(id);
    } catch (const Error&) {
      continue;  // an unused id
    }
    if (b.empty()) continue;
    ranks.emplace(b, id);
    ordinary.emplace_back(id, b);
    v.tokens[size_t(id)] = bytes_to_unicode(b);
    v.types[size_t(id)] = kTokenNormal;
  }
  for (auto [rank, b] : ordinary) {
    if (b.size() < 2) continue;
    std::vector<std::string_view> parts = bpe_parts(ranks, b, rank);
    if (parts.size() == 2) v.merges.push_back(bytes_to_unicode(parts[0]) + " " + bytes_to_unicode(parts[1]));
  }
  std::unordered_set<std::string> seen;
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (v.types[size_t(id)] == kTokenUnused) v.tokens[size_t(id)] = cat("[PAD", id, "]");
    SLUICE_CHECK(seen.insert(v.tokens[size_t(id)]).second, "token ", id, " ('", v.tokens[size_t(id)],
                 "') has the spelling of an earlier token; llama.cpp needs every spelling once");
  }
  return v;
}

}  // namespace sluice::gguf
