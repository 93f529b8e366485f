// UTF-8 validation, decoding and the streaming decoder (see utf8.h). Rules follow Unicode 3.9
// table 3-7: no overlongs, no surrogates, nothing above U+10FFFF.
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {

// How many bytes of text[pos..] form a prefix of some well-formed sequence (the "maximal subpart"),
// and whether that prefix is already complete. Returns {0,false} for a byte that can start nothing.
struct Subpart {
  size_t length;
  bool complete;
};

Subpart maximal_subpart(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size() - pos;
  unsigned char b0 = s[pos];
  if (b0 < 0x80) return {1, true};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {0, false};
  }
  size_t have = 1;
  for (; have < need && have < n; ++have) {
    unsigned char b = s[pos + have];
    unsigned char l = have == 1 ? lo : 0x80, h = have == 1 ? hi : 0xBF;
    if (b < l || b > h) return {have, false};
  }
  return {have, have == need};
}

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  Subpart p = maximal_subpart(text, pos);
  return p.complete ? p.length : 0;
}

uint32_t utf8_decode_at(std::string_view text, size_t pos, size_t length) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  switch (length) {
    case 1: return s[0];
    case 2: return (uint32_t(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return (uint32_t(s[0] & 0x0F) << 12) | (uint32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
      return (uint32_t(s[0] & 0x07) << 18) | (uint32_t(s[1] & 0x3F) << 12) | (uint32_t(s[2] & 0x3F) << 6) |
             (s[3] & 0x3F);
  }
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_valid_prefix(std::string_view text, size_t pos) {
  size_t i = pos;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  while (i < text.size()) {
    // ASCII fast path, eight bytes at a time.
    while (i + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= text.size()) break;
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = utf8_sequence_length(text, i);
    if (len == 0) break;
    i += len;
  }
  return i - pos;
}

bool utf8_is_valid(std::string_view text) { return utf8_valid_prefix(text, 0) == text.size(); }

size_t utf8_incomplete_tail(std::string_view text) {
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    size_t pos = text.size() - k;
    if ((static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) continue;  // continuation byte
    Subpart p = maximal_subpart(text, pos);
    return p.length == k && !p.complete ? k : 0;
  }
  return 0;
}

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t good = utf8_valid_prefix(bytes, i);
    out.append(bytes.substr(i, good));
    i += good;
    if (i >= bytes.size()) break;
    Subpart p = maximal_subpart(bytes, i);
    out.append("\xEF\xBF\xBD");
    i += p.length == 0 ? 1 : p.length;
  }
  return out;
}

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  std::string_view text = pending_;
  size_t i = 0;
  while (i < text.size()) {
    size_t good = utf8_valid_prefix(text, i);
    out.append(text.substr(i, good));
    i += good;
    if (i >= text.size()) break;
    Subpart p = maximal_subpart(text, i);
    if (p.length > 0 && !p.complete && i + p.length == text.size()) break;  // may still complete
    out.append("\xEF\xBF\xBD");
    i += p.length == 0 ? 1 : p.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8StreamDecoder::finish() {
  std::string out = pending_.empty() ? std::string() : utf8_replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace sluice::tokenizer
