// Token id -> bytes table, special-token registry and file reading (see token_table.h).
#include "tokenizer/token_table.h"
#include "tokenizer/utf8.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace sluice::tokenizer {

Tokenizer::~Tokenizer() = default;

bool Tokenizer::is_special(int32_t id) const {
  const auto& s = special_tokens();
  auto it = std::lower_bound(s.begin(), s.end(), id, [](const SpecialToken& t, int32_t v) { return t.id < v; });
  return it != s.end() && it->id == id;
}

std::string_view Tokenizer::generated_bytes(int32_t id) const {
  try {
    return token_bytes(id);
  } catch (const Error&) {
    return {};
  }
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SLUICE_CHECK(in.good(), path, ": cannot open for reading");
  std::ostringstream buf;
  buf << in.rdbuf();
  SLUICE_CHECK(!in.bad(), path, ": read error");
  return std::move(buf).str();
}

void TokenTable::set_ordinary(std::vector<std::string> tokens) {
  ordinary_.clear();
  ordinary_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ordinary_.emplace_back(int32_t(i), std::move(tokens[i]));
}

void TokenTable::set_ordinary_sparse(std::vector<std::pair<int32_t, std::string>> tokens) {
  ordinary_ = std::move(tokens);
}

void TokenTable::build(std::vector<SpecialToken> specials, int32_t n_ordinary, const std::string& name,
                       bool require_prefix_free) {
  std::sort(specials.begin(), specials.end(), [](const SpecialToken& a, const SpecialToken& b) { return a.id < b.id; });
  int32_t size = n_ordinary;
  for (const auto& [id, bytes] : ordinary_) size = std::max(size, id + 1);
  for (size_t i = 0; i < specials.size(); ++i) {
    const SpecialToken& s = specials[i];
    SLUICE_CHECK(s.id >= 0, name, ": special token '", s.spelling, "' has negative id ", s.id);
    SLUICE_CHECK(!s.spelling.empty(), name, ": special token id ", s.id, " has an empty spelling");
    SLUICE_CHECK(i == 0 || specials[i - 1].id != s.id, name, ": special token id ", s.id, " is defined twice");
    SLUICE_CHECK(special_by_spelling_.emplace(s.spelling, s.id).second, name, ": special token spelling '", s.spelling,
                 "' is used by two ids");
    size = std::max(size, s.id + 1);
  }
  if (require_prefix_free) {
    std::vector<std::string_view> spellings;
    for (const SpecialToken& s : specials) spellings.push_back(s.spelling);
    std::sort(spellings.begin(), spellings.end());
    for (size_t i = 1; i < spellings.size(); ++i)
      SLUICE_CHECK(spellings[i].substr(0, spellings[i - 1].size()) != spellings[i - 1], name, ": special token '",
                   spellings[i - 1], "' is a prefix of '", spellings[i], "' (specials must be prefix-unambiguous)");
  }
  std::vector<const std::string*> by_id(size_t(size), nullptr);
  for (const auto& [id, bytes] : ordinary_) by_id[size_t(id)] = &bytes;
  for (const SpecialToken& s : specials) by_id[size_t(s.id)] = &s.spelling;
  blob_.clear();
  offsets_.assign(1, 0);
  used_.assign(size_t(size), 0);
  for (int32_t id = 0; id < size; ++id) {
    if (by_id[size_t(id)]) {
      blob_ += *by_id[size_t(id)];
      used_[size_t(id)] = 1;
    }
    offsets_.push_back(uint32_t(blob_.size()));
  }
  specials_ = std::move(specials);
  ordinary_.clear();
  ordinary_.shrink_to_fit();
}

std::string_view TokenTable::bytes(int32_t id) const {
  SLUICE_CHECK(id >= 0 && id < vocab_size() && used_[size_t(id)], "tokenizer: token id ", id,
               " is not in the vocabulary (size ", vocab_size(), ")");
  return std::string_view(blob_).substr(offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
}

std::string TokenTable::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int32_t id : ids) out += bytes(id);
  return out;
}

std::optional<int32_t> TokenTable::special_id(std::string_view spelling) const {
  auto it = special_by_spelling_.find(std::string(spelling));
  if (it == special_by_spelling_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::encode_into_at_most(std::string_view text, std::vector<int32_t>& out, size_t max_ids) const {
  const size_t start = out.size();
  encode_into(text, out);
  return out.size() - start <= max_ids;
}

size_t TokenTable::longest_token() const {
  size_t longest = 1;
  for (size_t id = 0; id + 1 < offsets_.size(); ++id) longest = std::max<size_t>(longest, offsets_[id + 1] - offsets_[id]);
  return longest;
}

void TableTokenizer::encode_into(std::string_view text, std::vector<int32_t>& out) const {
  encode_within(text, out, SIZE_MAX);
}

bool TableTokenizer::encode_into_at_most(std::string_view text, std::vector<int32_t>& out, size_t max_ids) const {
  // Without a normaliser every id covers at most longest_ bytes of the text (an invalid byte: 1),
  // so a text longer than that allows is refused before any work (a 100 MB prompt costs nothing).
  if (!normalizes_ && max_ids < SIZE_MAX / longest_ && text.size() > max_ids * longest_) return false;
  const size_t limit = SIZE_MAX - out.size() > max_ids ? out.size() + max_ids : SIZE_MAX;
  return encode_within(text, out, limit);
}

bool TableTokenizer::encode_within(std::string_view text, std::vector<int32_t>& out, size_t limit) const {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t good = utf8_valid_prefix(text, pos);
    if (good > 0 && !encode_valid(text.substr(pos, good), out, limit)) return false;
    pos += good;
    if (pos < text.size()) out.push_back(byte_id_[static_cast<unsigned char>(text[pos++])]);
    if (out.size() > limit) return false;
  }
  return true;
}

}  // namespace sluice::tokenizer
