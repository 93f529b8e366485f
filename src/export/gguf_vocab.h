// A byte-level BPE vocabulary as llama.cpp's "gpt2" tokenizer model stores it: each token's bytes
// spelled through GPT-2's bytes_to_unicode, a token type per id, and the merges rebuilt from the
// ranks (tiktoken stores ranks only: a token of rank r is the merge of the two parts that BPE with
// only the ranks below r leaves it in; tokens that do not end as two parts have no merge).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::gguf {

// llama.cpp token types (llama_token_type).
inline constexpr int32_t kTokenNormal = 1, kTokenControl = 3, kTokenUnused = 5;

// The UTF-8 spelling of `bytes` under GPT-2's bytes_to_unicode (one code point per byte).
std::string bytes_to_unicode(std::string_view bytes);
// The inverse; false when `text` has a code point outside the map.
bool unicode_to_bytes(std::string_view text, std::string* bytes);

struct GgufVocab {
  std::vector<std::string> tokens;  // vocab_size entries
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // "A B", in rank order
};

// Builds the vocabulary of `vocab_size` ids from a tiktoken-style tokenizer: ids that are not
// special are the ranks (ordinary tokens, NORMAL), special tokens keep their spelling (CONTROL),
// ids neither has are "[PAD{id}]" (UNUSED). Throws when two ids would get the same spelling.
GgufVocab build_vocab(const tokenizer::Tokenizer& tok, int64_t vocab_size);

}  // namespace sluice::gguf
