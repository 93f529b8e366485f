// Where the pre-tokenizer is certain to start a piece, whatever text comes before and after:
// encoding can then be split there (encode(a + b) == encode(a) ++ encode(b)), which lets a caller
// re-encode only the end of a long text.
#pragma once
#include <cstddef>
#include <string_view>

namespace sluice::tokenizer {

// True when byte offset `pos` of `text` starts a pre-tokenizer piece for every text that agrees
// with `text` on [pos - 1, pos + 4) (what the rules look at):
//   (a) text[pos] is a space and a complete code point follows it that is not White_Space, not
//       a digit (\p{N}) and not in U+3000..U+9FFF (kana, CJK: DeepSeek-V3 splits those off first);
//   (b) text[pos - 1] is '\n' and text[pos] is an ASCII letter or digit;
//   (c) text[pos - 1] is an ASCII letter and text[pos] ASCII punctuation other than the apostrophe.
// Proved for the pre-tokenizers sluice implements (the K3, cl100k and o200k patterns; GPT-2's
// and Qwen2/3's Split + ByteLevel; DeepSeek-V3's splits) and checked against their encodings in
// the tests: none has a lookbehind, so a piece that starts at pos depends only on the text from
// pos on; and no alternative can run across the boundary. A space or newline occurs in a piece
// only as its optional first character, inside a pure-whitespace piece (which a following
// non-whitespace character ends: `\s+(?!\S)` gives back the last space, `\s*[\r\n]+` needs a
// newline after the space), or as trailing newlines of a punctuation piece (which a letter or
// digit ends). A letter piece takes letters and marks, plus a contraction that starts with an
// apostrophe, so punctuation ends it; punctuation joins a following letter run only as a piece's
// first character. NFC cannot join across these either: spaces, newlines and ASCII punctuation
// never compose. Not covered: Kimi's 400,000-character slices and 25,000-character runs of one
// kind, which only texts that long can differ by.
bool forced_piece_start(std::string_view text, size_t pos);

}  // namespace sluice::tokenizer
