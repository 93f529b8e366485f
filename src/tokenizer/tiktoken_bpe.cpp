// tiktoken-format BPE: rank-file parsing and validation, the Kimi K3 / cl100k / o200k
// pre-tokenisers, Kimi's slicing of long inputs, and ordinary-text encode / byte decode.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/byte_pair.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {

// Spec 4.2, written for PCRE2: Rust's class intersection [X&&[^\p{Han}]] becomes (?:(?!\p{Han})[X]).
const char* const kKimiK3Pattern =
    "[\\p{Han}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

// As tiktoken 0.14 spells them (possessive quantifiers are PCRE2 syntax too).
const char* const kCl100kPattern =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$"
    "|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";
const char* const kO200kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr int32_t kKimiRankCount = 163584;
constexpr int32_t kKimiReserved = 256;
constexpr size_t kKimiSliceChars = 400000;
constexpr size_t kKimiRunChars = 25000;

// Python's str.isspace(), which Kimi's slicing uses (it includes U+001C..U+001F, unlike \s).
bool python_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 with '=' padding; returns false on any deviation.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      unsigned char c = static_cast<unsigned char>(in[i + size_t(k)]);
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad) return false;  // data after padding
      v[k] = base64_value(c);
      if (v[k] < 0) return false;
    }
    uint32_t word = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out.push_back(char(word >> 16));
    if (pad < 2) out.push_back(char((word >> 8) & 0xFF));
    if (pad < 1) out.push_back(char(word & 0xFF));
    if (pad && (word & (pad == 2 ? 0xFFFFu : 0xFFu)) != 0) return false;  // non-canonical trailing bits
  }
  return true;
}

class TiktokenTokenizer final : public TableTokenizer {
 public:
  TiktokenTokenizer(std::string_view data, const std::string& name, const TiktokenOptions& options) {
    parse_ranks(data, name);
    if (options.require_k3_size)
      SLUICE_CHECK(n_ranks_ == kKimiRankCount, name, ": Kimi K3 rank file must have ", kKimiRankCount,
                   " ranks, found ", n_ranks_);
    std::vector<SpecialToken> specials = options.specials;
    if (options.pattern == TiktokenPattern::kimi_k3) {
      for (const SpecialToken& s : specials)
        SLUICE_CHECK(s.id >= n_ranks_ && s.id < n_ranks_ + kKimiReserved, name, ": added token id ", s.id, " (",
                     s.spelling, ") is outside the reserved range [", n_ranks_, ", ", n_ranks_ + kKimiReserved, ")");
      for (int32_t id = n_ranks_; id < n_ranks_ + kKimiReserved; ++id)
        if (std::none_of(specials.begin(), specials.end(), [&](const SpecialToken& s) { return s.id == id; }))
          specials.push_back(SpecialToken{id, cat("<|reserved_token_", id, "|>"), true});
    }
    for (const SpecialToken& s : specials)
      SLUICE_CHECK(s.id >= n_ranks_, name, ": special token ", s.spelling, " has id ", s.id,
                   ", which is an ordinary rank (< ", n_ranks_, ")");
    table_.build(std::move(specials), n_ranks_, name);
    table_built();
    kimi_slicing_ = options.pattern == TiktokenPattern::kimi_k3;
    const char* pattern = options.pattern == TiktokenPattern::kimi_k3     ? kKimiK3Pattern
                          : options.pattern == TiktokenPattern::cl100k_base ? kCl100kPattern
                                                                             : kO200kPattern;
    preset_ = options.pattern == TiktokenPattern::kimi_k3     ? "kimi_k3"
              : options.pattern == TiktokenPattern::cl100k_base ? "cl100k_base"
                                                                 : "o200k_base";
    regex_ = std::make_unique<RegexSplitter>(pattern, cat(name, ": pre-tokenizer ", preset_));
    for (int b = 0; b < 256; ++b) byte_id_[b] = ranks_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
  }

  std::string describe() const override {
    return cat("tiktoken/", preset_, " (", n_ranks_, " ranks, ", table_.specials().size(), " specials)");
  }

 private:
  void parse_ranks(std::string_view data, const std::string& name) {
    std::string bytes;
    size_t line_no = 0;
    size_t pos = 0;
    std::vector<std::string> tokens;
    while (pos < data.size()) {
      size_t eol = data.find('\n', pos);
      if (eol == std::string_view::npos) eol = data.size();
      std::string_view line = data.substr(pos, eol - pos);
      pos = eol + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        SLUICE_CHECK(pos >= data.size(), name, ":", line_no, ": empty line inside the rank file");
        break;
      }
      size_t space = line.find(' ');
      SLUICE_CHECK(space != std::string_view::npos && space > 0, name, ":", line_no,
                   ": expected 'base64 SPACE rank', got '", line.substr(0, 80), "'");
      std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
      SLUICE_CHECK(base64_decode(b64, bytes), name, ":", line_no, ": invalid base64 token '", b64.substr(0, 80), "'");
      SLUICE_CHECK(!rank_text.empty() && rank_text.size() <= 9 &&
                       std::all_of(rank_text.begin(), rank_text.end(), [](char c) { return c >= '0' && c <= '9'; }),
                   name, ":", line_no, ": rank '", rank_text.substr(0, 40), "' is not a decimal integer below 10^9");
      int32_t rank = std::stoi(std::string(rank_text));
      int32_t expected = int32_t(tokens.size());
      SLUICE_CHECK(rank >= expected, name, ":", line_no, ": duplicate or decreasing rank ", rank, " (expected ", expected,
                   "; ranks must be 0..N-1 in line order)");
      SLUICE_CHECK(rank == expected, name, ":", line_no, ": gap in ranks: expected ", expected, ", found ", rank);
      if (ranks_.size() == 0) ranks_.reserve(data.size() / 12 + 16);
      SLUICE_CHECK(ranks_.insert(bytes, rank), name, ":", line_no, ": token bytes of rank ", rank,
                   " duplicate an earlier rank (", ranks_.find(bytes), ")");
      tokens.push_back(bytes);
    }
    SLUICE_CHECK(!tokens.empty(), name, ": rank file is empty");
    for (int b = 0; b < 256; ++b) {
      char c = char(b);
      SLUICE_CHECK(ranks_.find(std::string_view(&c, 1)) >= 0, name, ": single byte 0x", std::hex, b,
                   " has no rank (all 256 bytes must be present)");
    }
    n_ranks_ = int32_t(tokens.size());
    table_.set_ordinary(std::move(tokens));
  }

  bool encode_valid(std::string_view text, std::vector<int32_t>& out, size_t limit) const override {
    if (!kimi_slicing_) return encode_chunk(text, out, limit);
    // Kimi: 400,000-character slices, each cut wherever a whitespace / non-whitespace run
    // (Python isspace) exceeds 25,000 characters; every piece is pre-tokenised on its own.
    size_t pos = 0;
    while (pos < text.size()) {
      size_t slice_end = pos, chars = 0;
      while (slice_end < text.size() && chars < kKimiSliceChars) {
        slice_end += utf8_sequence_length(text, slice_end);
        ++chars;
      }
      size_t start = pos, run = 0;
      bool run_space = false;
      for (size_t i = pos; i < slice_end;) {
        size_t len = utf8_sequence_length(text, i);
        bool space = python_isspace(utf8_decode_at(text, i, len));
        if (i == pos) run_space = space;
        if (space != run_space) {
          run = 1;
          run_space = space;
        } else if (++run > kKimiRunChars) {
          if (!encode_chunk(text.substr(start, i - start), out, limit)) return false;
          start = i;
          run = 1;
        }
        i += len;
      }
      if (!encode_chunk(text.substr(start, slice_end - start), out, limit)) return false;
      pos = slice_end;
    }
    return true;
  }

  // Pre-tokenises and encodes one chunk; stops after the first piece that takes out past `limit`.
  bool encode_chunk(std::string_view chunk, std::vector<int32_t>& out, size_t limit) const {
    size_t last = 0;
    bool within = true;
    regex_->for_each_match(chunk, [&](size_t begin, size_t end) {
      if (begin > last) bpe_encode_bytes(chunk.substr(last, begin - last), ranks_, out);  // unmatched gap
      bpe_encode_bytes(chunk.substr(begin, end - begin), ranks_, out);
      last = end;
      within = out.size() <= limit;
      return within;
    });
    if (!within) return false;
    if (last < chunk.size()) bpe_encode_bytes(chunk.substr(last), ranks_, out);
    return out.size() <= limit;
  }

  TokenRankMap ranks_;
  int32_t n_ranks_ = 0;
  bool kimi_slicing_ = false;
  std::string preset_;
  std::unique_ptr<RegexSplitter> regex_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken_bytes(std::string_view data, const std::string& name,
                                               const TiktokenOptions& options) {
  return std::make_unique<TiktokenTokenizer>(data, name, options);
}

std::unique_ptr<Tokenizer> load_tiktoken_file(const std::string& path, const TiktokenOptions& options) {
  return load_tiktoken_bytes(read_whole_file(path), path, options);
}

}  // namespace sluice::tokenizer
