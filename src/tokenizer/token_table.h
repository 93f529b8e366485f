// Id -> bytes table and the added/special token registry shared by both tokenizer formats, plus
// the file reader they use.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::tokenizer {

// Reads a whole file; throws sluice::Error naming the path when it cannot.
std::string read_whole_file(const std::string& path);

class TokenTable {
 public:
  // Ordinary tokens with contiguous ids 0..N-1.
  void set_ordinary(std::vector<std::string> tokens);
  // Ordinary tokens with arbitrary ids (missing ids stay unused).
  void set_ordinary_sparse(std::vector<std::pair<int32_t, std::string>> tokens);
  // Registers the specials (ids may overlap ordinary ids: the special spelling wins for decode).
  // Rejects duplicate ids or spellings, empty spellings and, when asked, spellings that are a
  // prefix of another one (K3 requires prefix-unambiguous specials).
  void build(std::vector<SpecialToken> specials, int32_t n_ordinary, const std::string& name,
             bool require_prefix_free = true);

  std::string decode(std::span<const int32_t> ids) const;
  std::string_view bytes(int32_t id) const;
  std::optional<int32_t> special_id(std::string_view spelling) const;
  const std::vector<SpecialToken>& specials() const { return specials_; }
  int32_t vocab_size() const { return int32_t(offsets_.size()) - 1; }
  // Bytes of the longest token (at least 1).
  size_t longest_token() const;

 private:
  std::string blob_;
  std::vector<uint32_t> offsets_{0};  // id i's bytes are blob_[offsets_[i], offsets_[i+1])
  std::vector<uint8_t> used_;
  std::vector<SpecialToken> specials_;
  std::unordered_map<std::string, int32_t> special_by_spelling_;
  std::vector<std::pair<int32_t, std::string>> ordinary_;
};

// What both byte-level BPE formats share: the id table and the handling of invalid UTF-8 (each bad
// byte becomes its single-byte token, so decode(encode(x)) == x for any bytes). A format supplies
// encode_valid() for well-formed text and fills byte_id_ with each single byte's id.
class TableTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    encode_into(text, out);
    return out;
  }
  void encode_into(std::string_view text, std::vector<int32_t>& out) const override;
  bool encode_into_at_most(std::string_view text, std::vector<int32_t>& out, size_t max_ids) const override;
  std::string decode(std::span<const int32_t> ids) const override { return table_.decode(ids); }
  std::string_view token_bytes(int32_t id) const override { return table_.bytes(id); }
  std::optional<int32_t> special_id(std::string_view spelling) const override { return table_.special_id(spelling); }
  const std::vector<SpecialToken>& special_tokens() const override { return table_.specials(); }
  int32_t vocab_size() const override { return table_.vocab_size(); }

 protected:
  // Appends the ids of well-formed text. A format checks out.size() against `limit` between
  // pieces (never inside one, so what it appends is the same whatever the limit) and returns false
  // as soon as it exceeds it; true when the text is done. The ids appended are final either way.
  virtual bool encode_valid(std::string_view text, std::vector<int32_t>& out, size_t limit) const = 0;
  // Call once the table is built (sets longest_).
  void table_built() { longest_ = table_.longest_token(); }
  TokenTable table_;
  int32_t byte_id_[256] = {};
  bool normalizes_ = false;  // a normaliser may shorten the text: no length bound before encoding
  size_t longest_ = 1;

 private:
  // encode_into, stopping once out.size() exceeds `limit`; false then.
  bool encode_within(std::string_view text, std::vector<int32_t>& out, size_t limit) const;
};

}  // namespace sluice::tokenizer
