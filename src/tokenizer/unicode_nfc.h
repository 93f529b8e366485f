// Unicode Normalization Form C for the tokenizer.json "NFC" normaliser (Qwen3), table driven
// (unicode_nfc_data.cpp) with a fast path for text that is already stable.
#pragma once
#include <string>
#include <string_view>

namespace sluice::tokenizer {

// NFC of valid UTF-8 `text`. Returns false (leaving `out` untouched) when `text` is already NFC
// by the quick check, so callers can keep using the original bytes.
bool nfc_normalize(std::string_view text, std::string& out);

}  // namespace sluice::tokenizer
