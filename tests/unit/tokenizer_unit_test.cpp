// Tokenizer building blocks and bad input, without downloaded data: UTF-8 helpers and the stream
// decoder, NFC, BPE merge order, rank-file and tokenizer.json validation, invalid UTF-8 and NUL
// bytes, model-directory loading, and very long inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_pair.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_data.h"

namespace sluice::tokenizer {
namespace {

std::string b64(const std::string& s) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t w = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += a[(w >> k) & 63];
  }
  if (s.size() - i == 1) {
    uint32_t w = uint8_t(s[i]) << 16;
    out += a[(w >> 18) & 63];
    out += a[(w >> 12) & 63];
    out += "==";
  } else if (s.size() - i == 2) {
    uint32_t w = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8);
    out += a[(w >> 18) & 63];
    out += a[(w >> 12) & 63];
    out += a[(w >> 6) & 63];
    out += '=';
  }
  return out;
}

// All 256 bytes, then the given merges, as a tiktoken rank file.
std::string rank_file(const std::vector<std::string>& merges) {
  std::string out;
  int rank = 0;
  for (int b = 0; b < 256; ++b) out += b64(std::string(1, char(b))) + " " + std::to_string(rank++) + "\n";
  for (const auto& m : merges) out += b64(m) + " " + std::to_string(rank++) + "\n";
  return out;
}

const std::vector<std::string> kMerges = {"ab", "bc", "abc", "aa", "aaaa", " t", "he", " the", "ll", "llo", "hello"};

std::unique_ptr<Tokenizer> tiny(TiktokenPattern p = TiktokenPattern::o200k_base) {
  TiktokenOptions opt;
  opt.pattern = p;
  return load_tiktoken_bytes(rank_file(kMerges), "tiny.tiktoken", opt);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerUtf8, ValidationAndReplacement) {
  EXPECT_TRUE(utf8_is_valid("plain ascii é 🌍 \xE4\xB8\xAD"));
  for (const char* bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8", "\xFF"})
    EXPECT_FALSE(utf8_is_valid(bad)) << bad;
  EXPECT_EQ(utf8_replace_invalid("a\xE4\xB8z\xFF"), "a\xEF\xBF\xBDz\xEF\xBF\xBD");
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x8C"), "\xEF\xBF\xBD");  // one maximal subpart
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xFF"), 0u);
}

TEST(TokenizerUtf8, StreamDecoderHoldsBackIncompleteCodePoints) {
  std::string text = "é🌍中 ok";
  Utf8StreamDecoder d;
  std::string out;
  for (char c : text) {
    std::string piece = d.push(std::string_view(&c, 1));
    EXPECT_TRUE(utf8_is_valid(piece));
    out += piece;
  }
  out += d.finish();
  EXPECT_EQ(out, text);
  EXPECT_EQ(d.push("\xF0\x9F"), "");
  EXPECT_EQ(d.pending(), 2u);
  EXPECT_EQ(d.push("x"), "\xEF\xBF\xBDx");  // cut short by a new character
  EXPECT_EQ(d.push("\xE4\xB8"), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");  // lossy at the end
  EXPECT_EQ(d.push("\xFF\xFEz"), "\xEF\xBF\xBD\xEF\xBF\xBDz");
}

TEST(TokenizerNfc, ComposesReordersAndKeepsStableText) {
  std::string out;
  EXPECT_FALSE(nfc_normalize("already NFC: café 中文 한국어", out));
  ASSERT_TRUE(nfc_normalize("e\xCC\x81", out));  // e + U+0301
  EXPECT_EQ(out, "é");
  ASSERT_TRUE(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", out));  // Hangul jamo L V T
  EXPECT_EQ(out, "각");
  ASSERT_TRUE(nfc_normalize("A\xCC\x80\xCC\x96", out));  // A + grave(230) + grave below(220)
  EXPECT_EQ(out, "\xC3\x80\xCC\x96");                     // À + U+0316
  ASSERT_TRUE(nfc_normalize("\xE2\x84\xA6", out));         // OHM SIGN -> GREEK CAPITAL OMEGA
  EXPECT_EQ(out, "\xCE\xA9");
}

// Texts longer than a piece (64 KB) that mix stable code points with ones NFC changes (marks to
// reorder and compose, Hangul jamo, singletons, composition exclusions), so that pieces end in
// the middle of everything: the bounded form must equal the whole-text NFC, and stop early.
TEST(TokenizerNfc, BoundedIsTheWholeNfcAndStopsEarly) {
  static const char* const parts[] = {"a", " ", "e", "\xCC\x81", "\xCC\x96", "\xCC\x80", "\xE1\x84\x80", "\xE1\x85\xA1",
                                      "\xE1\x86\xA8", "\xE2\x84\xA6", "\xE4\xB8\xAD", "\xC3\xA9", "\xE0\xA5\x98",
                                      "\xCD\x84", "\xEA\xB0\x81", "\n"};
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 4; ++round) {
    std::string text;
    // Round 1 has no ASCII at all: pieces must end at stable non-ASCII code points.
    while (text.size() < 300'000) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t k = x % 16;
      if (round == 1 && (k < 3 || k == 15)) k = 10;
      text += parts[k];
    }
    std::string whole;
    if (!nfc_normalize(text, whole)) whole = text;
    std::string bounded;
    ASSERT_TRUE(nfc_normalize_bounded(text, SIZE_MAX, bounded)) << round;
    EXPECT_TRUE(bounded == whole) << "round " << round << ": bounded NFC differs from the whole-text NFC";
    ASSERT_TRUE(nfc_normalize_bounded(text, whole.size(), bounded));
    EXPECT_FALSE(nfc_normalize_bounded(text, whole.size() - 1, bounded));
    EXPECT_EQ(bounded, whole.substr(0, bounded.size())) << "a stopped run leaves a prefix of the NFC";
  }
  // A piece's nominal end (64 KB) inside a sequence that composes or reorders: the piece must
  // run on to the next stable code point.
  for (const char* seq : {"e\xCC\x81", "A\xCC\x80\xCC\x96", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"}) {
    for (int shift = -9; shift <= 2; ++shift) {
      std::string text(size_t((64 << 10) + shift), 'a');
      text += seq;
      text += "\xE4\xB8\xAD";
      text += seq;
      std::string whole, bounded;
      ASSERT_TRUE(nfc_normalize(text, whole));
      ASSERT_TRUE(nfc_normalize_bounded(text, SIZE_MAX, bounded));
      EXPECT_TRUE(bounded == whole) << "a piece ended inside " << seq << " (shift " << shift << ")";
    }
  }
  // 30 MB of e + combining acute: stopped within a piece of 1,000 bytes, not normalised in full.
  std::string run;
  for (int i = 0; i < 10'000'000; ++i) run += "e\xCC\x81";
  std::string out;
  EXPECT_FALSE(nfc_normalize_bounded(run, 1000, out));
  EXPECT_LE(out.size(), 1000u + (64u << 10));
  EXPECT_EQ(out.substr(0, 4), "\xC3\xA9\xC3\xA9");
}

TEST(TokenizerBpe, MergeOrderAndLongPieces) {
  auto tok = tiny();
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{258}));  // whole piece
  EXPECT_EQ(tok->encode("hello"), (std::vector<int32_t>{266}));
  // "aaaaa": "aa" (259) merges leftmost first, then "aaaa" (260).
  EXPECT_EQ(tok->encode("aaaaa"), (std::vector<int32_t>{260, 'a'}));
  // Long pieces take the heap path; the result must equal the short path's rule.
  std::string run(5000, 'a');
  std::vector<int32_t> ids = tok->encode(run);
  EXPECT_EQ(ids.size(), 1250u);
  EXPECT_EQ(tok->decode(ids), run);
  std::string mixed;
  for (int i = 0; i < 3000; ++i) mixed += "abcab"[i % 5];
  EXPECT_EQ(tok->decode(tok->encode(mixed)), mixed);
  TokenRankMap ranks;
  for (int b = 0; b < 256; ++b) ranks.insert(std::string(1, char(b)), b);
  ranks.insert("ab", 256);
  ranks.insert("bc", 257);
  ranks.insert("abc", 258);
  std::string piece;
  for (int i = 0; i < 200; ++i) piece += "abc";
  std::vector<int32_t> out;
  bpe_encode_bytes(piece, ranks, out);  // > 96 bytes: heap path
  EXPECT_EQ(out, std::vector<int32_t>(200, 258));
}

TEST(TokenizerBadInput, InvalidUtf8AndNulRoundTrip) {
  for (auto p : {TiktokenPattern::kimi_k3, TiktokenPattern::cl100k_base, TiktokenPattern::o200k_base}) {
    auto tok = tiny(p);
    std::string nasty = std::string("he\0llo \xFF\xFE the\xC3 \xE4\xB8", 17) + std::string(1, '\0') + "abc\xF0\x9F\x8C";
    std::vector<int32_t> ids = tok->encode(nasty);
    EXPECT_EQ(tok->decode(ids), nasty);
    EXPECT_EQ(tok->decode(tok->encode(std::string(100, '\0'))), std::string(100, '\0'));
  }
  auto tok = tiny();
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{tok->vocab_size()}), Error);
}

TEST(TokenizerBadInput, MalformedRankFiles) {
  TiktokenOptions opt;
  auto load = [&](const std::string& data) { return error_of([&] { load_tiktoken_bytes(data, "bad.tiktoken", opt); }); };
  std::string good = rank_file({"ab"});
  EXPECT_EQ(load(good), "(no error)");
  EXPECT_NE(load(good + "YWI= 257\n").find("bad.tiktoken:258: token bytes of rank 257 duplicate"), std::string::npos);
  EXPECT_NE(load(good + "YWJj 256\n").find("bad.tiktoken:258: duplicate or decreasing rank 256"), std::string::npos);
  EXPECT_NE(load(good + "YWJj 300\n").find("bad.tiktoken:258: gap in ranks: expected 257, found 300"), std::string::npos);
  EXPECT_NE(load(good + "YW!j 257\n").find("bad.tiktoken:258: invalid base64"), std::string::npos);
  EXPECT_NE(load(good + "YWJ 257\n").find("invalid base64"), std::string::npos);
  EXPECT_NE(load(good + "YWJj x1\n").find("is not a decimal integer"), std::string::npos);
  EXPECT_NE(load(good + "YWJj\n").find("expected 'base64 SPACE rank'"), std::string::npos);
  EXPECT_NE(load(good + "YWJj 99999999999\n").find("is not a decimal integer"), std::string::npos);
  EXPECT_NE(load("").find("rank file is empty"), std::string::npos);
  EXPECT_NE(load("YQ== 0\n").find("single byte 0x0 has no rank"), std::string::npos);
  EXPECT_NE(load(good + "\nYWJj 257\n").find("empty line inside"), std::string::npos);
  opt.pattern = TiktokenPattern::kimi_k3;
  opt.specials = {{100, "<|open|>", true}};
  EXPECT_NE(load(good).find("outside the reserved range"), std::string::npos);
  opt.specials = {{257, "<|open|>", true}, {258, "<|open|>x", true}};
  EXPECT_NE(load(good).find("is a prefix of"), std::string::npos);
  opt.specials = {{257, "<|a|>", true}, {257, "<|b|>", true}};
  EXPECT_NE(load(good).find("defined twice"), std::string::npos);
  opt.require_k3_size = true;
  opt.specials.clear();
  EXPECT_NE(load(good).find("must have 163584 ranks"), std::string::npos);
}

// A minimal byte-level tokenizer.json: the 256 ByteLevel characters, merges "a b", "ab c" (in the
// pair form), "Ġ t", and <|end|>.
nlohmann::json tiny_tokenizer_json() {
  nlohmann::json j = testing::byte_level_tokenizer_json({"abc", " t"}, {{"<|end|>", true}},
                                                        "\\p{N}| ?\\p{L}+|\\s+(?!\\S)|\\s+");
  j["model"]["merges"][1] = {"ab", "c"};
  return j;
}

TEST(TokenizerJson, TinyByteLevelBpe) {
  auto tok = load_tokenizer_json_bytes(tiny_tokenizer_json().dump(), "tiny.json");
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok->encode(" t"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok->encode("e\xCC\x81"), tok->encode("é"));  // NFC first
  EXPECT_EQ(tok->special_id("<|end|>"), 259);
  EXPECT_EQ(tok->encode("<|end|>").size(), 7u);  // specials in text stay ordinary
  std::string nasty("x\xFF\0y\xE4", 5);
  EXPECT_EQ(tok->decode(tok->encode(nasty)), nasty);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{259, 257}), "<|end|>abc");
}

TEST(TokenizerBadInput, MalformedTokenizerJson) {
  auto load = [](const std::string& data) { return error_of([&] { load_tokenizer_json_bytes(data, "t.json"); }); };
  EXPECT_NE(load("{not json").find("t.json: not valid JSON"), std::string::npos);
  EXPECT_NE(load("[]").find("top level must be a JSON object"), std::string::npos);
  auto with = [](const char* ptr, nlohmann::json v) {
    nlohmann::json j = tiny_tokenizer_json();
    j[nlohmann::json::json_pointer(ptr)] = std::move(v);
    return j.dump();
  };
  EXPECT_NE(load(with("/normalizer", {{"type", "NFKC"}})).find("t.json.normalizer: unsupported normalizer type 'NFKC'"),
            std::string::npos);
  EXPECT_NE(load(with("/pre_tokenizer", {{"type", "Whitespace"}})).find("unsupported pre_tokenizer type 'Whitespace'"),
            std::string::npos);
  EXPECT_NE(load(with("/pre_tokenizer/pretokenizers/0/behavior", "Removed")).find("unsupported Split behavior"),
            std::string::npos);
  EXPECT_NE(load(with("/pre_tokenizer/pretokenizers/0/pattern/Regex", "([")).find("cannot compile"), std::string::npos);
  EXPECT_NE(load(with("/model/type", "WordPiece")).find("unsupported model type 'WordPiece'"), std::string::npos);
  EXPECT_NE(load(with("/decoder", {{"type", "Metaspace"}})).find("unsupported decoder type 'Metaspace'"), std::string::npos);
  EXPECT_NE(load(with("/post_processor", {{"type", "TemplateProcessing"}})).find("TemplateProcessing"), std::string::npos);
  EXPECT_NE(load(with("/model/merges/0", "a q")).find("merged token \"aq\" is not in the vocabulary"), std::string::npos);
  EXPECT_NE(load(with("/model/merges/0", "abc")).find("expected \"left right\""), std::string::npos);
  EXPECT_NE(load(with("/model/merges/0", 5)).find("expected a string or a pair"), std::string::npos);
  EXPECT_NE(load(with("/model/vocab/a", "x")).find("id must be an integer"), std::string::npos);
  EXPECT_NE(load(with("/model/vocab/a", 0)).find("is used twice"), std::string::npos);
  EXPECT_NE(load(with("/model/byte_fallback", true)).find("byte_fallback"), std::string::npos);
  EXPECT_NE(load(with("/added_tokens/0/id", -3)).find("added_tokens[0].id"), std::string::npos);
  nlohmann::json j = tiny_tokenizer_json();
  j["model"]["vocab"].erase("a");
  EXPECT_NE(load(j.dump()).find("byte 0x61"), std::string::npos);
  j = tiny_tokenizer_json();
  j.erase("model");
  EXPECT_NE(load(j.dump()).find("missing field 'model'"), std::string::npos);
}

TEST(TokenizerLoad, ModelDirectory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("sluice_tok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_EQ(load_tokenizer(dir.string()), nullptr);
  std::ofstream(dir / "tiktoken.model") << rank_file(kMerges);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"added_tokens_decoder": {"267": {"content": "[BOS]", "special": true}, "270": {"content": "<|open|>"}}})";
  auto tok = load_tokenizer(dir.string());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 267 + 256);
  EXPECT_EQ(tok->special_id("[BOS]"), 267);
  EXPECT_EQ(tok->special_id("<|reserved_token_268|>"), 268);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{270, 266}), "<|open|>hello");
  EXPECT_TRUE(tok->is_special(270));
  EXPECT_FALSE(tok->is_special(266));
  std::ofstream(dir / "tokenizer_config.json") << R"({"added_tokens_decoder": {"x": {"content": "[BOS]"}}})";
  EXPECT_NE(error_of([&] { load_tokenizer(dir.string()); }).find("is not a token id"), std::string::npos);
  fs::remove(dir / "tiktoken.model");
  fs::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json().dump();
  ASSERT_NE(load_tokenizer(dir.string()), nullptr);
  fs::remove_all(dir);
}

TEST(TokenizerPieces, ForcedPieceStartRules) {
  using namespace std::string_literals;
  EXPECT_TRUE(forced_piece_start("a b", 1));
  EXPECT_TRUE(forced_piece_start("a  b", 2));          // the last of several spaces
  EXPECT_FALSE(forced_piece_start("a  b", 1));         // a space followed by a space
  EXPECT_FALSE(forced_piece_start("a \n", 1));         // ... or by a newline
  EXPECT_FALSE(forced_piece_start("a ", 1));           // nothing follows yet
  EXPECT_TRUE(forced_piece_start("a \xC3\xA9", 1));    // a multi-byte letter follows
  EXPECT_FALSE(forced_piece_start("a 1", 1));          // digits and CJK may be split off first
  EXPECT_FALSE(forced_piece_start("a \xD9\xA3", 1));    // (U+0663, an Arabic-Indic digit)
  EXPECT_FALSE(forced_piece_start("a \xE4\xB8\xAD", 1));
  EXPECT_FALSE(forced_piece_start("a \xC3", 1));       // ... not complete yet
  EXPECT_FALSE(forced_piece_start("a \xE3\x80\x80x", 1));  // U+3000 is White_Space
  EXPECT_FALSE(forced_piece_start("a \xC2\xA0x", 1));  // so is NBSP
  EXPECT_TRUE(forced_piece_start("a\nb", 2));
  EXPECT_TRUE(forced_piece_start("a\n7", 2));
  EXPECT_FALSE(forced_piece_start("!\n/x", 2));        // o200k keeps "/" with "!\n"
  EXPECT_FALSE(forced_piece_start("a\n\xC3\xA9", 2));  // only ASCII after a newline
  EXPECT_TRUE(forced_piece_start("them, and", 4));    // punctuation after a letter
  EXPECT_TRUE(forced_piece_start("a.b", 1));
  EXPECT_FALSE(forced_piece_start("it's", 2));        // a contraction joins the word
  EXPECT_FALSE(forced_piece_start("12,", 2));         // only after a letter
  EXPECT_FALSE(forced_piece_start("ab", 1));
  EXPECT_FALSE(forced_piece_start("ab", 2));
  EXPECT_FALSE(forced_piece_start("x\0 y"s, 0));
}

TEST(TokenizerPieces, EncodingSplitsExactlyAtForcedStarts) {
  // The K3 pattern (the default target's rank file) and Qwen's Split + ByteLevel.
  auto k3 = load_tokenizer(std::string(SLUICE_SOURCE_DIR) + "/models/default/target");
  ASSERT_NE(k3, nullptr);
  EXPECT_GE(testing::expect_forced_starts_split(*k3, "default target (K3 pattern)"), 50);
  auto qwen = load_tokenizer_json_bytes(
      testing::byte_level_tokenizer_json({" the", " and", "in", "er", " light", "'s", "\n\n"}, {},
                                         testing::kQwenSplitPattern)
          .dump(),
      "qwen-like.json");
  EXPECT_GE(testing::expect_forced_starts_split(*qwen, "Qwen split"), 50);
  // Power: splitting anywhere else does change some encodings.
  int differ = 0;
  for (const std::string& text : testing::piece_boundary_texts())
    for (size_t pos = 1; pos < text.size(); ++pos) {
      std::vector<int32_t> parts = k3->encode(std::string_view(text).substr(0, pos));
      k3->encode_into(std::string_view(text).substr(pos), parts);
      differ += parts != k3->encode(text);
    }
  EXPECT_GT(differ, 100);
}

TEST(TokenizerLoad, SameVocabulary) {
  const std::string root = SLUICE_SOURCE_DIR;
  auto target = load_tokenizer(root + "/models/default/target");
  auto draft = load_tokenizer(root + "/models/default/draft");
  ASSERT_NE(target, nullptr);
  ASSERT_NE(draft, nullptr);
  EXPECT_TRUE(same_vocabulary(*target, *draft));
  auto tiny = load_tokenizer_json_bytes(tiny_tokenizer_json().dump(), "tiny.json");
  EXPECT_FALSE(same_vocabulary(*target, *tiny));
  EXPECT_TRUE(same_vocabulary(*tiny, *load_tokenizer_json_bytes(tiny_tokenizer_json().dump(), "again.json")));
  nlohmann::json j = tiny_tokenizer_json();
  j["added_tokens"][0]["content"] = "<|other|>";
  EXPECT_FALSE(same_vocabulary(*tiny, *load_tokenizer_json_bytes(j.dump(), "other.json")));
}

}  // namespace
}  // namespace sluice::tokenizer
