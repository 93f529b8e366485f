// Public face of the tokenizer layer: the Tokenizer interface (ordinary-text encode, byte decode,
// special-token lookup) and the loaders for model directories, tiktoken rank files and tokenizer.json.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tokenizer {

// An added/special token: its id and exact spelling. `special` mirrors the file's flag
// (Hugging Face non-special added tokens such as Qwen3's <think> have special == false).
struct SpecialToken {
  int32_t id = 0;
  std::string spelling;
  bool special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer();

  // Encodes ordinary text. Special-token spellings in `text` are never recognised (they become
  // ordinary BPE tokens). Bytes that are not valid UTF-8 are encoded as their single-byte tokens,
  // in place, so decode(encode(x)) == x for every byte string x (before normalisation, see below).
  // Tokenizers with a normaliser (Qwen3: NFC) return ids of the normalised text.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Appends to `out` instead of returning a new vector (the chat renderers use this).
  virtual void encode_into(std::string_view text, std::vector<int32_t>& out) const = 0;
  // encode_into with a budget, for untrusted text that must fit a context: gives up as soon as
  // more than `max_ids` ids have been appended and returns false ("too long"; what was appended
  // is a prefix of the encoding, possibly empty when a bound proved it too long first: each id
  // stands for at most the longest token's bytes, each pre-token for at least one id). Returns
  // true when the whole text encodes to at most max_ids ids; `out` then holds exactly what
  // encode_into appends. The default encodes in full and then counts; the BPE tokenizers stop
  // within a pre-token of the budget.
  virtual bool encode_into_at_most(std::string_view text, std::vector<int32_t>& out, size_t max_ids) const;

  // Concatenates the raw bytes of each token (specials decode to their spelling). The result may
  // be invalid UTF-8 when ids split a code point; use Utf8StreamDecoder (utf8.h) for display.
  // Throws sluice::Error for an id outside [0, vocab_size()) or an unused id.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  // Bytes of one token (a view into the tokenizer; valid for its lifetime).
  virtual std::string_view token_bytes(int32_t id) const = 0;
  // The same for an id a model generated: "" for an id the tokenizer does not use (a model's
  // vocabulary may have more rows than its tokenizer has tokens: Qwen3 151,936 for 151,669).
  std::string_view generated_bytes(int32_t id) const;

  // Id of an added/special token by exact spelling (e.g. "<|im_end|>", "<|open|>").
  virtual std::optional<int32_t> special_id(std::string_view spelling) const = 0;
  // All added/special tokens, ordered by id.
  virtual const std::vector<SpecialToken>& special_tokens() const = 0;
  // Whether `id` is an added/special token.
  bool is_special(int32_t id) const;

  // One past the largest id (ordinary and special).
  virtual int32_t vocab_size() const = 0;

  // "tiktoken" or "tokenizer.json", plus the pattern preset or model family when known
  // (for example "tiktoken/kimi_k3", "tokenizer.json/qwen3").
  virtual std::string describe() const = 0;
};

// Pre-tokeniser patterns for tiktoken-format rank files.
enum class TiktokenPattern {
  kimi_k3,      // spec 4.2, with Kimi's 400,000-character slicing and 25,000-character run cutting
  cl100k_base,  // OpenAI cl100k_base
  o200k_base,   // OpenAI o200k_base
};

struct TiktokenOptions {
  TiktokenPattern pattern = TiktokenPattern::kimi_k3;
  // Specials with explicit ids; for kimi_k3 the 256 reserved ids after the ranks are filled with
  // <|reserved_token_{id}|> where not given here.
  std::vector<SpecialToken> specials;
  // Kimi K3 files must have exactly 163,584 ranks; off for cl100k/o200k and tests.
  bool require_k3_size = false;
};

// Loads a tiktoken rank file ("base64 SPACE rank" per line; ranks 0..N-1 in line order, unique,
// all 256 single bytes present). Throws sluice::Error naming the file and line on malformed input.
std::unique_ptr<Tokenizer> load_tiktoken_file(const std::string& path, const TiktokenOptions& options);
// Same, from bytes already in memory; `name` is used in error messages.
std::unique_ptr<Tokenizer> load_tiktoken_bytes(std::string_view data, const std::string& name,
                                               const TiktokenOptions& options);

// Loads a Hugging Face tokenizer.json (byte-level BPE as used by Qwen3 and DeepSeek-V3). Components
// outside that set are refused with an error naming them.
std::unique_ptr<Tokenizer> load_tokenizer_json_file(const std::string& path);
std::unique_ptr<Tokenizer> load_tokenizer_json_bytes(std::string_view data, const std::string& name);

// True when both map every id to the same bytes and have the same added/special tokens: a draft
// model over `b` then reads and writes the target's (`a`'s) ids directly.
bool same_vocabulary(const Tokenizer& a, const Tokenizer& b);

// Loads tiktoken.model (+ tokenizer_config.json's added_tokens_decoder, K3 layout) or tokenizer.json
// from a model directory; returns nullptr when the directory has no tokenizer files; throws
// sluice::Error on malformed ones.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

}  // namespace sluice::tokenizer
