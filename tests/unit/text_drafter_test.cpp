// Drafting through text across two tokenizers (the default target's tiktoken BPE with the K3
// pattern; a byte-level tokenizer.json with Qwen's pattern for the draft): every proposal extends
// the committed history exactly, with specials (shared by spelling or not) and multi-byte UTF-8
// in the history; the draft's context equals the segment-wise encoding of the history's text
// whatever order the histories come in; and the target window stays small on long histories.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/speculate/text_drafter.h"
#include "text_draft_util.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace {

using runtime::TextDrafter;

// A conversation-like target history: [BOS], text, <|end_of_msg|> (the draft has it too), text,
// <|open|> (the draft lacks it: it sees the spelling as text), text.
struct Conversation {
  std::vector<int32_t> ids;
  std::string text;           // the history's text (specials spelled)
  std::vector<size_t> stops;  // where each special's spelling starts in text
  std::vector<bool> special;  // per id
};

Conversation make_conversation(const tokenizer::Tokenizer& target) {
  const std::vector<std::string> segments = {
      "And God said, Let there be light: and there was light. Caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e, "
      "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB5\x8B\xE8\xAF\x95\xEF\xBC\x8C\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 ok!\n\n"
      "It's 2024;  we'll see 12345 cats.\n",
      "The second message, with\ttabs and   spaces \xC2\xA0 nbsp.\nLine two!",
      "Last words here, then more text to continue with for a while: the end of the light."};
  const std::vector<std::string> specials = {"[BOS]", "<|end_of_msg|>", "<|open|>"};
  Conversation c;
  for (size_t i = 0; i < segments.size(); ++i) {
    c.stops.push_back(c.text.size());
    c.ids.push_back(*target.special_id(specials[i]));
    c.text += specials[i];
    c.special.push_back(true);
    for (int32_t id : target.encode(segments[i])) {
      c.ids.push_back(id);
      c.special.push_back(false);
    }
    c.text += segments[i];
  }
  return c;
}

// The draft ids of the first n history ids: each text run encoded on its own, each special the
// draft's token of that spelling or its spelling as text.
std::vector<int32_t> expected_context(const Conversation& c, size_t n, const tokenizer::Tokenizer& target,
                                      const tokenizer::Tokenizer& draft) {
  std::vector<int32_t> out;
  std::string run;
  for (size_t i = 0; i < n; ++i) {
    if (!c.special[i]) {
      run += target.token_bytes(c.ids[i]);
      continue;
    }
    draft.encode_into(run, out);
    run.clear();
    std::string_view spelling = target.token_bytes(c.ids[i]);
    if (auto id = draft.special_id(spelling)) out.push_back(*id);
    else draft.encode_into(spelling, out);
  }
  draft.encode_into(run, out);
  return out;
}

class TextDrafterExact : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = tokenizer::load_tokenizer(testing::kDefaultTarget);
    ASSERT_NE(target_, nullptr);
    draft_ = testing::draft_tokenizer();
    conv_ = make_conversation(*target_);
  }
  std::unique_ptr<TextDrafter> drafter() {
    return std::make_unique<TextDrafter>(std::make_unique<testing::ScriptedTextLm>(conv_.text, conv_.stops),
                                         testing::draft_tokenizer(), *target_, testing::scripted_options());
  }
  // Checks the proposal at cut n (history = ids[0..n)) and returns it.
  std::vector<int32_t> check_cut(TextDrafter& d, size_t n, int max_tokens) {
    std::span<const int32_t> history(conv_.ids.data(), n);
    std::vector<int32_t> p = d.propose(history, max_tokens);
    size_t end = n;  // the next special: the scripted draft stops there
    while (end < conv_.ids.size() && !conv_.special[end]) ++end;
    EXPECT_LE(p.size(), size_t(max_tokens));
    EXPECT_LE(n + p.size(), end) << "cut " << n << ": proposed past the end of the text run";
    for (size_t k = 0; k < p.size() && n + k < conv_.ids.size(); ++k)
      EXPECT_EQ(p[k], conv_.ids[n + k]) << "cut " << n << ": proposal " << k << " does not extend the history";
    std::vector<int32_t> want = expected_context(conv_, n, *target_, *draft_);
    std::span<const int32_t> got = d.last_context();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << "cut " << n << ": draft context";
    return p;
  }
  std::unique_ptr<tokenizer::Tokenizer> target_, draft_;
  Conversation conv_;
};

TEST_F(TextDrafterExact, ProposalsExtendTheHistoryExactly) {
  auto d = drafter();
  size_t proposed = 0, possible = 0;
  std::vector<std::vector<int32_t>> in_order(conv_.ids.size() + 1);
  for (size_t n = 1; n <= conv_.ids.size(); ++n) {
    in_order[n] = check_cut(*d, n, 4);
    proposed += in_order[n].size();
    possible += n < conv_.ids.size() && !conv_.special[n];
  }
  // The scripted draft knows the text, so most cuts get a proposal; the exceptions are cuts
  // whose continuation the target merges with the history's last token.
  std::printf("[text drafter] %zu tokens proposed over %zu cuts, %lld window mismatches\n", proposed, possible,
              (long long)d->counters().mismatched);
  EXPECT_GT(proposed, possible);
  // Histories in any order (a server continues other conversations): the same proposals.
  auto shuffled = drafter();
  std::vector<size_t> order;
  for (size_t n = 1; n <= conv_.ids.size(); ++n) order.push_back(n);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (size_t n : order) EXPECT_EQ(check_cut(*shuffled, n, 4), in_order[n]) << "cut " << n;
}

TEST_F(TextDrafterExact, TargetWindowStaysSmallOnALongHistory) {
  // A long run of text (no specials): each step re-encodes only a few words on either side.
  std::string text;
  for (int i = 0; i < 300; ++i) text += "and there was light, and it was good " + std::to_string(i) + ". ";
  std::vector<int32_t> ids = target_->encode(text);
  TextDrafter d(std::make_unique<testing::ScriptedTextLm>(text, std::vector<size_t>{}), testing::draft_tokenizer(),
                *target_, testing::scripted_options());
  const size_t first = ids.size() / 2;
  d.propose(std::span<const int32_t>(ids).first(first), 4);  // the first call encodes everything once
  const auto before = d.counters();
  int steps = 0;
  for (size_t n = first + 1; n < ids.size(); n += 3, ++steps) {
    auto p = d.propose(std::span<const int32_t>(ids).first(n), 4);
    for (size_t k = 0; k < p.size(); ++k) ASSERT_EQ(p[k], ids[n + k]);
  }
  const auto after = d.counters();
  const double target_per_step = double(after.target_reencoded_bytes - before.target_reencoded_bytes) / steps;
  const double draft_per_step = double(after.draft_reencoded_bytes - before.draft_reencoded_bytes) / steps;
  std::printf("[text drafter] history of %zu bytes: %.1f target and %.1f draft bytes re-encoded per step\n",
              text.size(), target_per_step, draft_per_step);
  EXPECT_LT(target_per_step, 80);
  EXPECT_LT(draft_per_step, 80);
  EXPECT_GT(after.proposed - before.proposed, steps);
}

TEST_F(TextDrafterExact, HistoryEndingInASpecialOrNoisyTextStillExtendsExactly) {
  // History whose ids are not the canonical encoding of its text (the target may produce such
  // ids): single-byte tokens for a word. Proposals must still start a valid re-encoding.
  std::vector<int32_t> ids = target_->encode("Let there be");
  for (char ch : std::string(" light")) {
    std::vector<int32_t> one = target_->encode(std::string(1, ch));
    ids.insert(ids.end(), one.begin(), one.end());
  }
  std::string text = target_->decode(ids) + ": and there was light.";
  TextDrafter d(std::make_unique<testing::ScriptedTextLm>(text, std::vector<size_t>{}), testing::draft_tokenizer(),
                *target_, testing::scripted_options());
  auto p = d.propose(ids, 4);
  // The window starts at " l" (a forced piece start): its re-encoding is " light", not the
  // history's single bytes, so nothing is proposed rather than something inexact.
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(d.counters().mismatched, 1);
  // After a special the window is empty: the proposal is the continuation's own encoding.
  std::vector<int32_t> with_special = target_->encode("Let there be light");
  with_special.push_back(*target_->special_id("<|end_of_msg|>"));
  std::string text2 = target_->decode(with_special) + "And there was light, and";
  TextDrafter d2(std::make_unique<testing::ScriptedTextLm>(text2, std::vector<size_t>{}), testing::draft_tokenizer(),
                 *target_, testing::scripted_options());
  auto p2 = d2.propose(with_special, 3);
  std::vector<int32_t> want = target_->encode("And there was light, and");
  ASSERT_FALSE(p2.empty());
  EXPECT_TRUE(std::equal(p2.begin(), p2.end(), want.begin()));
}

}  // namespace
}  // namespace sluice
