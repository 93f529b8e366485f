// Test-side access to tokenizer data: the committed fixtures under tests/fixtures/tokenizer and the
// large npm-fetched files (scripts/fetch-tokenizer-data.sh), loaded once per test process; and a
// builder of small byte-level tokenizer.json files.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/token_table.h"
#include "tokenizer/pieces.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + name;
}

// Directory with the fetched data, fetching it on first use; nullopt when unavailable (offline).
// SLUICE_TOKENIZER_DATA overrides the location; SLUICE_NO_FETCH=1 forbids the download.
inline std::optional<std::string> data_dir() {
  static const std::optional<std::string> dir = []() -> std::optional<std::string> {
    const char* env = std::getenv("SLUICE_TOKENIZER_DATA");
    std::string d = env && *env ? env : std::string(SLUICE_SOURCE_DIR) + "/build/tokenizer-data";
    if (!std::getenv("SLUICE_NO_FETCH")) {
      std::string cmd = "bash '" + std::string(SLUICE_SOURCE_DIR) + "/scripts/fetch-tokenizer-data.sh' '" + d + "' 1>&2";
      if (std::system(cmd.c_str()) != 0) return std::nullopt;
    }
    if (!std::filesystem::exists(d + "/.complete")) return std::nullopt;
    return d;
  }();
  return dir;
}

// Loads (once) one of the reference tokenizers: cl100k_base, o200k_base, k3_o200k (the K3 pattern
// over o200k ranks), qwen3, deepseek_v3. nullptr when the data is absent.
inline const Tokenizer* reference_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto dir = data_dir();
  if (!dir) return nullptr;
  std::unique_ptr<Tokenizer> tok;
  TiktokenOptions opt;
  if (name == "cl100k_base") {
    opt.pattern = TiktokenPattern::cl100k_base;
    tok = load_tiktoken_file(*dir + "/cl100k_base.tiktoken", opt);
  } else if (name == "o200k_base" || name == "k3_o200k") {
    opt.pattern = name == "o200k_base" ? TiktokenPattern::o200k_base : TiktokenPattern::kimi_k3;
    tok = load_tiktoken_file(*dir + "/o200k_base.tiktoken", opt);
  } else {
    tok = load_tokenizer_json_file(*dir + "/" + name + "/tokenizer.json");
  }
  return (cache[name] = std::move(tok)).get();
}

// Qwen2/3's pre-tokenizer pattern (a Split before a ByteLevel step without its own regex).
inline const char* const kQwenSplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// A byte-level BPE tokenizer.json: the 256 ByteLevel characters (ids 0..255), then for each of
// `words` (raw bytes) the merges that build it left to right (new tokens get the next ids), then
// `added` tokens (spelling, special flag). NFC normaliser, `split` as the pre-tokenizer's Split.
inline nlohmann::json byte_level_tokenizer_json(const std::vector<std::string>& words,
                                                const std::vector<std::pair<std::string, bool>>& added,
                                                const std::string& split) {
  uint32_t alphabet[256];
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (uint32_t b = 0, next = 256; b < 256; ++b) {
    bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    alphabet[b] = keep ? b : next++;
    std::string ch;
    utf8_append(ch, alphabet[b]);
    vocab[ch] = id++;
  }
  nlohmann::json merges = nlohmann::json::array();
  for (const std::string& w : words) {
    std::string left;
    for (size_t i = 0; i < w.size(); ++i) {
      std::string ch;
      utf8_append(ch, alphabet[static_cast<unsigned char>(w[i])]);
      if (i > 0 && !vocab.contains(left + ch)) {
        merges.push_back(left + " " + ch);
        vocab[left + ch] = id++;
      }
      left += ch;
    }
  }
  nlohmann::json added_json = nlohmann::json::array();
  for (const auto& [spelling, special] : added) added_json.push_back({{"id", id++}, {"content", spelling}, {"special", special}});
  return {{"version", "1.0"},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", split}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"post_processor", nullptr},
          {"added_tokens", added_json},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

// Texts that exercise forced piece starts: double spaces, tabs, CRLF, punctuation before
// newlines, contractions, digits, multi-byte letters and spaces (NBSP, U+3000), CJK, emoji.
inline const std::vector<std::string>& piece_boundary_texts() {
  static const std::vector<std::string> texts = {
      "And God said, Let there be light:  and there was light.\n\nIt's 2024; we'll see 12345 cats!\n",
      "  leading spaces,\ttabs\t here, \r\n CRLF\r\nlines and trailing   ",
      "Caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xE6\xB5\x8B\xE8\xAF\x95"
      "\xEF\xBC\x8C\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 ok \xF0\x9F\x98\x80\xF0\x9F\x98\x81x",
      "nbsp\xC2\xA0here \xC2\xA0x \xE3\x80\x80y \xE3\x80\x80 z  \xE2\x80\x83w",
      "def f(x):\n    return x**2  # square\n\nif __name__ == '__main__':\n\tprint(f(3))\n/* c */ a/b",
      "!!\n/x !\nx ?\n\n9 ...\n  -x --y\n--\nZ'S THE END'll 'd",
  };
  return texts;
}

// At every forced piece start of every text, encoding splits exactly there. Returns how many
// starts were checked.
inline int expect_forced_starts_split(const Tokenizer& tok, const std::string& label,
                                      const std::vector<std::string>& texts = piece_boundary_texts()) {
  int checked = 0;
  for (const std::string& text : texts) {
    const std::vector<int32_t> whole = tok.encode(text);
    for (size_t pos = 1; pos < text.size(); ++pos) {
      if (!forced_piece_start(text, pos)) continue;
      std::vector<int32_t> parts = tok.encode(std::string_view(text).substr(0, pos));
      tok.encode_into(std::string_view(text).substr(pos), parts);
      EXPECT_EQ(parts, whole) << label << ": split at byte " << pos << " of \"" << text << "\"";
      ++checked;
    }
  }
  return checked;
}

// FNV-1a over the ids' 32-bit little-endian bytes (tools/tokenizer/pack_fixtures.py computes the same).
inline uint64_t fnv1a_ids(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) h = (h ^ ((uint32_t(id) >> (8 * k)) & 0xFF)) * 0x100000001B3ULL;
  return h;
}

}  // namespace sluice::tokenizer::testing

#define SLUICE_REQUIRE_TOKENIZER(var, name)                                                         \
  const ::sluice::tokenizer::Tokenizer* var = ::sluice::tokenizer::testing::reference_tokenizer(name); \
  if (!var)                                                                                         \
  GTEST_SKIP() << "tokenizer data absent (offline?): run scripts/fetch-tokenizer-data.sh to test " << name
