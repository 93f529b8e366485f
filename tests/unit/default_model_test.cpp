// The built-in default model pair (models/default, trained by tools/train on the GPU machine):
// the target's logits and greedy tokens against the PyTorch reference (tools/reference/kimi_ref.py)
// saved in tests/fixtures/default_target/expected.safetensors, the draft's loading, and the
// tokenizer against tiktoken's ids for the same rank file (tests/fixtures/default_target/tokenizer_cases.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "format/safetensors.h"
#include "model/kimi.h"
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
  auto expected = format::SafetensorsFile::open(kFixture + "/expected.safetensors");
  auto find = [&](const std::string& name) -> const format::TensorInfo* {
    for (const auto& t : expected->tensors())
      if (t.name == name) return &t;
    return nullptr;
  };
  int prompts = 0;
  for (int p = 0; find("prompt_ids_" + std::to_string(p)) != nullptr; ++p) {
    ++prompts;
    const auto& ids_t = *find("prompt_ids_" + std::to_string(p));
    const auto* logits_t = find("logits_" + std::to_string(p));
    const auto* greedy_t = find("greedy_ids_" + std::to_string(p));
    ASSERT_NE(logits_t, nullptr);
    ASSERT_NE(greedy_t, nullptr);
    std::vector<int32_t> ids(ids_t.nbytes / 4), greedy(greedy_t->nbytes / 4);
    std::vector<float> ref(logits_t->nbytes / 4);
    std::memcpy(ids.data(), ids_t.data, ids_t.nbytes);
    std::memcpy(greedy.data(), greedy_t->data, greedy_t->nbytes);
    std::memcpy(ref.data(), logits_t->data, logits_t->nbytes);
    ASSERT_EQ(ref.size(), ids.size() * size_t(V));

    auto st = model->new_state();
    std::vector<float> got(ref.size());
    model->forward(st, ids, model::PassOptions{.all_logits = true}, got.data());
    double worst = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      double scale = 0, err = 0;
      for (int64_t v = 0; v < V; ++v) {
        const size_t i = t * size_t(V) + size_t(v);
        scale = std::max(scale, std::fabs(double(ref[i])));
        err = std::max(err, std::fabs(double(got[i]) - ref[i]));
      }
      worst = std::max(worst, err / std::max(scale, 1e-30));
    }
    EXPECT_LE(worst, 1e-4) << "prompt " << p << ": max relative logit error " << worst;
    std::printf("[default model] prompt %d: max relative logit error %.3g over %zu positions\n", p, worst, ids.size());

    auto st2 = model->new_state();
    runtime::GenerateOptions opt{.max_new = int64_t(greedy.size()), .stop_at_eos = false};
    auto r = runtime::generate_greedy(*model, st2, ids, opt);
    EXPECT_EQ(r.generated, greedy) << "prompt " << p << ": greedy tokens differ from the reference";
  }
  EXPECT_EQ(prompts, 3);
}

TEST(DefaultModel, DraftLoadsWithTheTargetsVocabulary) {
  auto draft = model::KimiModel::load(kDraft);
  EXPECT_EQ(draft->config().vocab_size, 4352);
  auto st = draft->new_state();
  std::vector<int32_t> ids{100, 200, 300};
  std::vector<float> logits(size_t(draft->config().vocab_size));
  draft->forward(st, ids, model::PassOptions{}, logits.data());
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
