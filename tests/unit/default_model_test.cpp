// The built-in default model pair (models/default, trained by tools/train on the GPU machine):
// the target's logits and greedy tokens against the PyTorch reference (tools/reference/kimi_ref.py)
// saved in tests/fixtures/default_target/expected.safetensors, the draft's loading, and the
// tokenizer against tiktoken's ids for the same rank file (tests/fixtures/default_target/tokenizer_cases.json).
#include <gtest/gtest.h>

#include "golden_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "format/safetensors.h"
#include "model/arch/kimi.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace {

const std::string kRoot = SLUICE_SOURCE_DIR;
const std::string kTarget = kRoot + "/models/default/target";
const std::string kDraft = kRoot + "/models/default/draft";
const std::string kFixture = kRoot + "/tests/fixtures/default_target";

TEST(DefaultModel, TargetLogitsAndGreedyTokensMatchTheReference) {
  auto model = model::KimiModel::load(kTarget);
  const int64_t V = model->config().vocab_size;
  ASSERT_EQ(V, 4352);
  int prompts = testing::check_against_reference(*model, kFixture + "/expected.safetensors", "default target");
  EXPECT_EQ(prompts, 3);
}

TEST(DefaultModel, DraftLoadsWithTheTargetsVocabulary) {
  auto draft = model::KimiModel::load(kDraft);
  EXPECT_EQ(draft->config().vocab_size, 4352);
  auto st = draft->new_state();
  std::vector<int32_t> ids{100, 200, 300};
  std::vector<float> logits(size_t(draft->config().vocab_size));
  draft->forward(*st, ids, model::PassOptions{}, logits.data());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(DefaultModel, TokenizerMatchesTiktoken) {
  auto tok = tokenizer::load_tokenizer(kTarget);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 4352);
  EXPECT_EQ(tok->special_id("[BOS]"), std::optional<int32_t>(4096));
  EXPECT_EQ(tok->special_id("<|end_of_msg|>"), std::optional<int32_t>(4098));
  EXPECT_EQ(tok->special_id("[PAD]"), std::optional<int32_t>(4351));
  std::ifstream in(kFixture + "/tokenizer_cases.json");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  auto cases = nlohmann::json::parse(ss.str());
  int n = 0;
  for (const auto& c : cases["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), want) << "text: " << text;
    EXPECT_EQ(tok->decode(want), text);
    ++n;
  }
  EXPECT_GE(n, 5);
}

TEST(DefaultModel, DraftSharesTheTargetsTokenizer) {
  auto a = tokenizer::load_tokenizer(kTarget);
  auto b = tokenizer::load_tokenizer(kDraft);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string text = "And God said, Let there be light: and there was light.";
  EXPECT_EQ(a->encode(text), b->encode(text));
}

}  // namespace
}  // namespace sluice
