// Forced pre-tokenizer piece starts (see pieces.h for why each rule holds).
#include "tokenizer/pieces.h"

#include <cstdint>

#include "tokenizer/regex_splitter.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {

// Unicode White_Space, the set the pre-tokenizers' \s means (regex_splitter.cpp spells it so).
bool white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Characters an earlier Split isolates before the main pattern runs (DeepSeek-V3: \p{N}{1,3},
// then kana and CJK ideographs): a whitespace run before one of them ends with its own piece, so
// `\s+(?!\S)` sees the end of the piece there, not the character, and keeps every space.
bool isolated_by_a_split(std::string_view cp) {
  static const RegexSplitter digits_or_cjk("[\\p{N}\\x{3000}-\\x{9FFF}]", "forced_piece_start");
  bool hit = false;
  digits_or_cjk.for_each_match(cp, [&](size_t, size_t) { hit = true; });
  return hit;
}

bool ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

bool forced_piece_start(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  if (text[pos] == ' ') {
    size_t len = utf8_sequence_length(text, pos + 1);
    if (len == 0 || white_space(utf8_decode_at(text, pos + 1, len))) return false;
    const char next = text[pos + 1];
    if (len == 1) return next < '0' || next > '9';
    return !isolated_by_a_split(text.substr(pos + 1, len));
  }
  if (pos == 0) return false;
  const char prev = text[pos - 1], c = text[pos];
  if (prev == '\n') return ascii_alnum(c);
  const bool prev_letter = (prev >= 'a' && prev <= 'z') || (prev >= 'A' && prev <= 'Z');
  return prev_letter && c > ' ' && c < 0x7F && !ascii_alnum(c) && c != '\'';
}

}  // namespace sluice::tokenizer
