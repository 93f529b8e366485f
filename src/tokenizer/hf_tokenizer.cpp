// Hugging Face tokenizer.json byte-level BPE: the components Qwen3 and DeepSeek-V3 use (NFC /
// empty Sequence normalisers, Split(Isolated) + ByteLevel pre-tokenisers, BPE with merges, ByteLevel
// decoder); anything else is refused by name. Added tokens are never recognised in ordinary text.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "core/error.h"
#include "format/json_util.h"
#include "tokenizer/byte_pair.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {
using Json = nlohmann::json;

// GPT-2's ByteLevel alphabet: printable Latin-1 bytes map to themselves, the rest to U+0100 upwards.
struct ByteLevelAlphabet {
  uint32_t byte_to_char[256];
  std::unordered_map<uint32_t, uint8_t> char_to_byte;
  ByteLevelAlphabet() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byte_to_char[b] = keep ? b : next++;
      char_to_byte[byte_to_char[b]] = uint8_t(b);
    }
  }
};
const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet a;
  return a;
}

// GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex = true.
const char* const kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

const Json& field(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  SLUICE_CHECK(it != obj.end(), where, ": missing field '", key, "'");
  return *it;
}

std::string type_of(const Json& component, const std::string& where) {
  SLUICE_CHECK(component.is_object(), where, ": expected an object");
  const Json& t = field(component, "type", where);
  SLUICE_CHECK(t.is_string(), where, ".type: expected a string");
  return t.get<std::string>();
}

bool flag(const Json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  return it->is_boolean() ? it->get<bool>() : fallback;
}

class HfTokenizer final : public TableTokenizer {
 public:
  HfTokenizer(std::string_view data, const std::string& name) : name_(name) {
    bool too_deep = false;
    Json root = format::parse_json_or_discarded<Json>(data, &too_deep);
    SLUICE_CHECK(!too_deep, name, ": JSON nested deeper than the limit of ", format::kMaxJsonDepth, " levels");
    SLUICE_CHECK(!root.is_discarded(), name, ": not valid JSON");
    SLUICE_CHECK(root.is_object(), name, ": top level must be a JSON object");
    parse_normalizer(root.value("normalizer", Json()), name + ".normalizer");
    normalizes_ = nfc_;
    parse_pre_tokenizer(field(root, "pre_tokenizer", name), name + ".pre_tokenizer");
    check_decoder(root.value("decoder", Json()), name + ".decoder");
    check_post_processor(root.value("post_processor", Json()), name + ".post_processor");
    parse_model(field(root, "model", name), name + ".model");
    parse_added(root.value("added_tokens", Json::array()), name + ".added_tokens");
  }

  std::string describe() const override {
    return cat("tokenizer.json/byte-level BPE (", n_vocab_, " tokens, ", n_merges_, " merges, ",
               table_.specials().size(), " added", nfc_ ? ", NFC" : "", ")");
  }

 private:
  void parse_normalizer(const Json& n, const std::string& where) {
    if (n.is_null()) return;
    std::string type = type_of(n, where);
    if (type == "NFC") {
      nfc_ = true;
    } else if (type == "Sequence") {
      const Json& list = field(n, "normalizers", where);
      SLUICE_CHECK(list.is_array(), where, ".normalizers: expected an array");
      for (size_t i = 0; i < list.size(); ++i) parse_normalizer(list[i], cat(where, ".normalizers[", i, "]"));
    } else {
      fail(where, ": unsupported normalizer type '", type, "' (supported: NFC, Sequence)");
    }
  }

  void parse_pre_tokenizer(const Json& p, const std::string& where) {
    std::string type = type_of(p, where);
    if (type == "Sequence") {
      const Json& list = field(p, "pretokenizers", where);
      SLUICE_CHECK(list.is_array(), where, ".pretokenizers: expected an array");
      for (size_t i = 0; i < list.size(); ++i) parse_pre_tokenizer(list[i], cat(where, ".pretokenizers[", i, "]"));
      return;
    }
    SLUICE_CHECK(!byte_level_seen_, where, ": a '", type, "' step after ByteLevel is not supported");
    if (type == "Split") {
      const Json& behavior = field(p, "behavior", where);
      SLUICE_CHECK(behavior == "Isolated", where, ".behavior: unsupported Split behavior ", behavior.dump(),
                   " (supported: Isolated)");
      SLUICE_CHECK(!flag(p, "invert", false), where, ".invert: inverted Split is not supported");
      const Json& pattern = field(p, "pattern", where);
      SLUICE_CHECK(pattern.is_object(), where, ".pattern: expected an object");
      if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
        splits_.push_back(std::make_unique<RegexSplitter>(pattern["Regex"].get<std::string>(), where + ".pattern.Regex"));
      } else if (pattern.contains("String") && pattern["String"].is_string()) {
        splits_.push_back(std::make_unique<RegexSplitter>(quote_literal(pattern["String"].get<std::string>()),
                                                          where + ".pattern.String"));
      } else {
        fail(where, ".pattern: expected {\"Regex\": string} or {\"String\": string}");
      }
    } else if (type == "ByteLevel") {
      SLUICE_CHECK(!flag(p, "add_prefix_space", false), where,
                   ".add_prefix_space: true is not supported (Qwen3 and DeepSeek-V3 use false)");
      if (flag(p, "use_regex", true))
        splits_.push_back(std::make_unique<RegexSplitter>(kGpt2Pattern, where + " (GPT-2 pattern)"));
      byte_level_seen_ = true;
    } else {
      fail(where, ": unsupported pre_tokenizer type '", type, "' (supported: Sequence, Split, ByteLevel)");
    }
  }

  static std::string quote_literal(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
    return out;
  }

  static void check_decoder(const Json& d, const std::string& where) {
    SLUICE_CHECK(!d.is_null(), where, ": missing; byte-level BPE needs a ByteLevel decoder");
    std::string type = type_of(d, where);
    SLUICE_CHECK(type == "ByteLevel", where, ": unsupported decoder type '", type, "' (supported: ByteLevel)");
  }

  static void check_post_processor(const Json& p, const std::string& where) {
    if (p.is_null()) return;
    std::string type = type_of(p, where);
    SLUICE_CHECK(type == "ByteLevel", where, ": unsupported post_processor type '", type,
                 "' (supported: ByteLevel, null)");
  }

  void parse_model(const Json& m, const std::string& where) {
    SLUICE_CHECK(byte_level_seen_, name_, ".pre_tokenizer: no ByteLevel step; only byte-level BPE is supported");
    std::string type = type_of(m, where);
    SLUICE_CHECK(type == "BPE", where, ": unsupported model type '", type, "' (supported: BPE)");
    SLUICE_CHECK(!flag(m, "byte_fallback", false), where, ".byte_fallback: true is not supported");
    SLUICE_CHECK(m.value("dropout", Json()).is_null(), where, ".dropout: BPE dropout is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      Json v = m.value(key, Json());
      SLUICE_CHECK(v.is_null() || (v.is_string() && v.get<std::string>().empty()), where, ".", key,
                   ": non-empty affixes are not supported");
    }
    ignore_merges_ = flag(m, "ignore_merges", false);
    const Json& vocab = field(m, "vocab", where);
    SLUICE_CHECK(vocab.is_object(), where, ".vocab: expected an object");
    std::unordered_map<std::string, int32_t> id_of;
    id_of.reserve(vocab.size());
    std::vector<std::pair<int32_t, std::string>> tokens;
    tokens.reserve(vocab.size());
    std::vector<uint8_t> seen;
    const auto& alpha = alphabet();
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      SLUICE_CHECK(it.value().is_number_integer(), where, ".vocab[\"", it.key(), "\"]: id must be an integer");
      int64_t id = it.value().get<int64_t>();
      SLUICE_CHECK(id >= 0 && id < (1 << 30), where, ".vocab[\"", it.key(), "\"]: id ", id, " out of range");
      if (seen.size() <= size_t(id)) seen.resize(size_t(id) + 1, 0);
      SLUICE_CHECK(!seen[size_t(id)], where, ".vocab: id ", id, " is used twice (again by \"", it.key(), "\")");
      seen[size_t(id)] = 1;
      id_of.emplace(it.key(), int32_t(id));
      tokens.emplace_back(int32_t(id), byte_level_decode(it.key()));
      if (ignore_merges_) whole_.insert(it.key(), int32_t(id));
    }
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      utf8_append(ch, alpha.byte_to_char[b]);
      auto f = id_of.find(ch);
      SLUICE_CHECK(f != id_of.end(), where, ".vocab: byte 0x", std::hex, b, std::dec, " (\"", ch,
                   "\") is missing; byte-level BPE needs all 256");
      byte_id_[b] = f->second;
    }
    const Json& merges = field(m, "merges", where);
    SLUICE_CHECK(merges.is_array(), where, ".merges: expected an array");
    merges_.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
      const Json& e = merges[r];
      std::string left, right;
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        SLUICE_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, where, ".merges[", r,
                     "]: expected \"left right\", got \"", s, "\"");
        left = s.substr(0, sp);
        right = s.substr(sp + 1);
      } else {
        SLUICE_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), where, ".merges[", r,
                     "]: expected a string or a pair of strings");
        left = e[0].get<std::string>();
        right = e[1].get<std::string>();
      }
      auto l = id_of.find(left), rr = id_of.find(right), mm = id_of.find(left + right);
      SLUICE_CHECK(l != id_of.end() && rr != id_of.end(), where, ".merges[", r, "]: \"", left, "\" or \"", right,
                   "\" is not in the vocabulary");
      SLUICE_CHECK(mm != id_of.end(), where, ".merges[", r, "]: merged token \"", left + right,
                   "\" is not in the vocabulary");
      merges_.insert(l->second, rr->second, int32_t(r), mm->second);
    }
    n_vocab_ = int32_t(tokens.size());
    n_merges_ = int32_t(merges.size());
    table_.set_ordinary_sparse(std::move(tokens));
  }

  void parse_added(const Json& added, const std::string& where) {
    SLUICE_CHECK(added.is_array(), where, ": expected an array");
    std::vector<SpecialToken> specials;
    for (size_t i = 0; i < added.size(); ++i) {
      const Json& a = added[i];
      std::string w = cat(where, "[", i, "]");
      SLUICE_CHECK(a.is_object(), w, ": expected an object");
      const Json& id = field(a, "id", w);
      const Json& content = field(a, "content", w);
      SLUICE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30), w,
                   ".id: expected a non-negative integer");
      SLUICE_CHECK(content.is_string(), w, ".content: expected a string");
      specials.push_back(SpecialToken{id.get<int32_t>(), content.get<std::string>(), flag(a, "special", false)});
    }
    table_.build(std::move(specials), 0, name_, false);
    table_built();
  }

  // Maps a vocabulary key from the ByteLevel alphabet back to bytes. Keys with characters outside
  // the alphabet (unreachable by encoding) keep their UTF-8 spelling.
  static std::string byte_level_decode(const std::string& key) {
    std::string out;
    const auto& alpha = alphabet();
    for (size_t i = 0; i < key.size();) {
      size_t len = utf8_sequence_length(key, i);
      if (len == 0) return key;
      auto f = alpha.char_to_byte.find(utf8_decode_at(key, i, len));
      if (f == alpha.char_to_byte.end()) return key;
      out.push_back(char(f->second));
      i += len;
    }
    return out;
  }

  bool encode_valid(std::string_view text, std::vector<int32_t>& out, size_t limit) const override {
    // Each id stands for at most longest_ bytes of the normalised text, so text longer than
    // (room + 1) * longest_ - 1 bytes cannot fit; normalisation stops there.
    const size_t room = limit - std::min(limit, out.size());
    const size_t max_bytes = limit == SIZE_MAX || room >= SIZE_MAX / longest_ - 1 ? SIZE_MAX : (room + 1) * longest_ - 1;
    std::string normalized;
    if (nfc_ && max_bytes == SIZE_MAX) {
      if (nfc_normalize(text, normalized)) text = normalized;
    } else if (nfc_) {
      if (!nfc_normalize_bounded(text, max_bytes, normalized)) return false;
      text = normalized;
    }
    if (text.size() > max_bytes) return false;
    thread_local std::vector<std::pair<size_t, size_t>> pieces, next;
    pieces.assign(1, {0, text.size()});
    for (const auto& split : splits_) {
      next.clear();
      for (const auto& range : pieces) {
        size_t b = range.first, e = range.second;  // plain locals: clang 14 cannot capture bindings
        std::string_view piece = text.substr(b, e - b);
        size_t last = 0;
        split->for_each_match(piece, [&](size_t mb, size_t me) {
          if (mb > last) next.emplace_back(b + last, b + mb);
          next.emplace_back(b + mb, b + me);
          last = me;
        });
        if (last < piece.size()) next.emplace_back(b + last, e);
      }
      pieces.swap(next);
    }
    // Every piece gives at least one id.
    if (limit != SIZE_MAX && pieces.size() > limit - std::min(limit, out.size())) return false;
    thread_local std::vector<int32_t> symbols;
    for (auto [b, e] : pieces) {
      std::string_view piece = text.substr(b, e - b);
      if (ignore_merges_) {
        std::string key;
        for (unsigned char c : piece) utf8_append(key, alphabet().byte_to_char[c]);
        int32_t id = whole_.find(key);
        if (id >= 0) {
          out.push_back(id);
          if (out.size() > limit) return false;
          continue;
        }
      }
      symbols.clear();
      for (unsigned char c : piece) symbols.push_back(byte_id_[c]);
      bpe_merge_ids(symbols, merges_, out);
      if (out.size() > limit) return false;
    }
    return true;
  }

  std::string name_;
  bool nfc_ = false;
  bool byte_level_seen_ = false;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<RegexSplitter>> splits_;
  MergeTable merges_;
  TokenRankMap whole_;  // byte-level key -> id, only with ignore_merges
  int32_t n_vocab_ = 0, n_merges_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json_bytes(std::string_view data, const std::string& name) {
  try {
    return std::make_unique<HfTokenizer>(data, name);
  } catch (const nlohmann::json::exception& e) {
    fail(name, ": unexpected JSON type: ", e.what());
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_json_file(const std::string& path) {
  return load_tokenizer_json_bytes(read_whole_file(path), path);
}

}  // namespace sluice::tokenizer
