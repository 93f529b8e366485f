// Forced pre-tokenizer piece starts (see pieces.h for why each rule holds).
#include "tokenizer/pieces.h"

#include <cstdint>

#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {

// Unicode White_Space, the set the pre-tokenizers' \s means (regex_splitter.cpp spells it so).
bool white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

bool forced_piece_start(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  if (text[pos] == ' ') {
    size_t len = utf8_sequence_length(text, pos + 1);
    return len > 0 && !white_space(utf8_decode_at(text, pos + 1, len));
  }
  return pos > 0 && text[pos - 1] == '\n' && ascii_alnum(text[pos]);
}

}  // namespace sluice::tokenizer
