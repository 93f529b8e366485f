// Unicode Normalization Form C for the tokenizer.json "NFC" normaliser (Qwen3), table driven
// (unicode_nfc_data.cpp) with a fast path for text that is already stable.
#pragma once
#include <string>
#include <string_view>

namespace sluice::tokenizer {

// NFC of valid UTF-8 `text`. Returns false (leaving `out` untouched) when `text` is already NFC
// by the quick check, so callers can keep using the original bytes.
bool nfc_normalize(std::string_view text, std::string& out);

// NFC of valid UTF-8 `text` into `out`, piece by piece, stopping once more than `max_bytes` have
// been written: for a caller that refuses text past a length, so that a long prompt is not
// normalised in full before it is refused. Pieces end before a stable code point (class 0, its
// own NFC, never the second of a composition), where no reordering or composition can reach
// across, so the pieces' NFCs joined are the NFC of the whole. Returns true with the whole NFC in
// `out`, or false once it is longer than `max_bytes` (`out` then holds a prefix of it).
bool nfc_normalize_bounded(std::string_view text, size_t max_bytes, std::string& out);

}  // namespace sluice::tokenizer
