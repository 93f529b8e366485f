// Encoding with an id budget (Tokenizer::encode_into_at_most, ChatOptions::max_ids), as the server
// and `sluice run` use it against the context length: an in-limit text encodes to exactly what
// encode_into gives, one id too many is "too long", and a long text is abandoned soon after the
// budget is spent (within a piece), not encoded in full.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat.h"
#include "tokenizer_test_data.h"

namespace sluice::tokenizer {
namespace {

// The default model's tokenizer (K3 pattern, a small tiktoken vocabulary, K3 chat specials):
// always present in the checkout.
const Tokenizer& default_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = load_tokenizer(std::string(SLUICE_SOURCE_DIR) + "/models/default/target");
  return *tok;
}

// A byte-level tokenizer.json with an NFC normaliser and the Qwen split (the HF code path).
const Tokenizer& hf_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = load_tokenizer_json_bytes(
      testing::byte_level_tokenizer_json({"the", " the", "and", " and", "ing", "light"}, {}, testing::kQwenSplitPattern)
          .dump(),
      "limit-test tokenizer.json");
  return *tok;
}

// Many short words and punctuation: about n bytes, a few bytes per id.
std::string prose(size_t n) {
  static const char* const words[] = {"And", " God", " said,", " Let", " there", " be", " light:", "  and",
                                      " there", " was", " light.\n", " It's", " 2024;", " 12345", " cats!"};
  std::string s;
  for (size_t i = 0; s.size() < n; ++i) s += words[(i * 7 + i / 3) % 15];
  return s;
}

std::vector<std::pair<std::string, const Tokenizer*>> tokenizers() {
  std::vector<std::pair<std::string, const Tokenizer*>> all = {{"default", &default_tokenizer()}, {"hf", &hf_tokenizer()}};
  for (const char* name : {"cl100k_base", "k3_o200k", "qwen3", "deepseek_v3"})
    if (const Tokenizer* t = testing::reference_tokenizer(name)) all.emplace_back(name, t);
  return all;
}

TEST(TokenizerLimit, InLimitIsExactAndOneTooManyIsRefused) {
  std::vector<std::string> texts = testing::piece_boundary_texts();
  texts.push_back(prose(100'000));
  texts.push_back(std::string("bad \xFF\xFE utf-8 \xC3") + prose(2000));
  for (const auto& [name, tok] : tokenizers()) {
    for (const std::string& text : texts) {
      const std::vector<int32_t> want = tok->encode(text);
      ASSERT_FALSE(want.empty());
      std::vector<int32_t> got = {7, 8};  // the budget counts only what this call appends
      EXPECT_TRUE(tok->encode_into_at_most(text, got, want.size())) << name << ": " << text.substr(0, 40);
      EXPECT_EQ(std::vector<int32_t>(got.begin() + 2, got.end()), want) << name << ": " << text.substr(0, 40);
      std::vector<int32_t> over = {7, 8};
      EXPECT_FALSE(tok->encode_into_at_most(text, over, want.size() - 1)) << name << ": " << text.substr(0, 40);
      // What was appended is a prefix of the full encoding.
      ASSERT_LE(over.size() - 2, want.size()) << name;
      EXPECT_TRUE(std::equal(over.begin() + 2, over.end(), want.begin())) << name;
    }
  }
}

// Bytes of the longest ordinary token: a text of n bytes has at least n / longest ids.
size_t longest_token(const Tokenizer& tok) {
  size_t longest = 1;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    try {
      longest = std::max(longest, tok.token_bytes(id).size());
    } catch (const std::exception&) {  // an unused id
    }
  }
  return longest;
}

TEST(TokenizerLimit, StopsSoonAfterTheBudget) {
  // 2 MB of prose with a budget its length cannot rule out (the bytes / longest-token bound):
  // encoding ends within a piece of the budget instead of going through the text.
  const std::string text = prose(2'000'000);
  for (const auto& [name, tok] : tokenizers()) {
    const size_t budget = text.size() / longest_token(*tok) + 1;
    std::vector<int32_t> out;
    EXPECT_FALSE(tok->encode_into_at_most(text, out, budget)) << name;
    EXPECT_LE(out.size(), budget + 64) << name << ": encoding went on past the budget";
  }
  // A 2 MB run of one letter: Kimi cuts it into 25,000-character pieces, and the default
  // tokenizer stops after the piece that crosses the budget.
  const std::string run(2'000'000, 'a');
  const size_t budget = run.size() / longest_token(default_tokenizer()) + 1;
  std::vector<int32_t> out;
  EXPECT_FALSE(default_tokenizer().encode_into_at_most(run, out, budget));
  EXPECT_LE(out.size(), budget + 25'000);
  EXPECT_LT(out.size(), default_tokenizer().encode(run).size());
}

TEST(TokenizerLimit, LengthAloneProvesTooLong) {
  // More bytes than the budget times the longest token: refused before anything is encoded (for
  // the tokenizer with NFC, once the normalised text is that long: it is normalised piece by
  // piece and stops there).
  for (const Tokenizer* tok : {&default_tokenizer(), testing::reference_tokenizer("cl100k_base"), &hf_tokenizer()}) {
    if (!tok) continue;
    std::vector<int32_t> out;
    EXPECT_FALSE(tok->encode_into_at_most(std::string(100'000'000, 'x'), out, 32767));
    EXPECT_TRUE(out.empty());
  }
  // 60 MB that NFC shortens (e + combining acute -> é): refused the same way; a short run of it
  // that fits is encoded as without a budget.
  std::string marks;
  for (int i = 0; i < 20'000'000; ++i) marks += "e\xCC\x81";
  std::vector<int32_t> out;
  EXPECT_FALSE(hf_tokenizer().encode_into_at_most(marks, out, 32767));
  EXPECT_TRUE(out.empty());
  std::string fits;
  for (size_t i = 0; i < 2000; ++i) fits += "e\xCC\x81";
  EXPECT_TRUE(hf_tokenizer().encode_into_at_most(fits, out, hf_tokenizer().encode(fits).size()));
  EXPECT_EQ(out, hf_tokenizer().encode(fits));
}

TEST(TokenizerLimit, ChatRenderStopsAtMaxIds) {
  const Tokenizer& tok = default_tokenizer();
  auto format = detect_chat_format(tok);
  ASSERT_TRUE(format.has_value());
  ChatJson messages = ChatJson::array({{{"role", "system"}, {"content", "Be brief."}},
                                       {{"role", "user"}, {"content", prose(3000)}}});
  const RenderedChat full = render_chat(tok, *format, messages);
  ASSERT_FALSE(full.too_long);
  ChatOptions o;
  o.max_ids = full.ids.size();
  RenderedChat exact = render_chat(tok, *format, messages, o);
  EXPECT_FALSE(exact.too_long);
  EXPECT_EQ(exact.ids, full.ids);
  EXPECT_EQ(exact.text, full.text);
  o.max_ids = full.ids.size() - 1;
  EXPECT_TRUE(render_chat(tok, *format, messages, o).too_long);
  // A 2 MB message with a budget its length cannot rule out: stopped within a piece of it.
  messages[1]["content"] = prose(2'000'000);
  o.max_ids = 2'000'000 / longest_token(tok) + 1;
  RenderedChat big = render_chat(tok, *format, messages, o);
  EXPECT_TRUE(big.too_long);
  EXPECT_LE(big.ids.size(), o.max_ids + 64);
}

}  // namespace
}  // namespace sluice::tokenizer
