// The generation loop under a token constraint (runtime/constraint.h): every token is one the
// constraint allowed, greedy picks the target's best allowed token (checked against the unmasked
// logits the loop reports), the constraint's state follows the emitted tokens even through verify
// passes that reject drafts, and greedy output with drafting on equals it with drafting off.
#include <gtest/gtest.h>

#include <cmath>

#include "model/arch/kimi.h"
#include "model_test_util.h"
#include "guide/grammar.h"
#include "runtime/generate.h"
#include "runtime/grammar_constraint.h"
#include "runtime/speculate/drafter.h"

namespace sluice {
namespace {

using runtime::GenerateOptions;

// Allows t when t % 4 == state, where the state is (the last accepted token + 1) % 4, starting at
// 0: which tokens are allowed depends on every token before, so a constraint that is not moved
// back after judging drafts goes wrong at once.
class ModChain : public runtime::TokenConstraint {
 public:
  explicit ModChain(int64_t vocab) : vocab_(vocab) {}
  void allowed(std::vector<uint64_t>& bits) override {
    ++masks;
    std::fill(bits.begin(), bits.end(), 0);
    for (int64_t t = state_; t < vocab_; t += 4) bits[size_t(t >> 6)] |= uint64_t(1) << (t & 63);
  }
  bool allows(int32_t t) override { return t % 4 == state_; }
  void accept(int32_t t) override {
    EXPECT_TRUE(allows(t)) << "accepted token " << t << " the constraint refuses";
    state_ = (t + 1) % 4;
    accepted.push_back(t);
  }
  // The log of accepted tokens is part of the state: tokens judged after save() and then
  // restored away leave it.
  void save() override {
    saved_ = state_;
    saved_len_ = accepted.size();
  }
  void restore() override {
    state_ = saved_;
    accepted.resize(saved_len_);
  }
  int state() const { return state_; }

  std::vector<int32_t> accepted;
  int masks = 0;

 private:
  int64_t vocab_;
  int state_ = 0, saved_ = 0;
  size_t saved_len_ = 0;
};

// Proposes `truth` from where the history is, every `every`-th token wrong on purpose.
class ReplayDrafter : public runtime::Drafter {
 public:
  ReplayDrafter(std::vector<int32_t> truth, size_t prompt_len, int every)
      : truth_(std::move(truth)), prompt_len_(prompt_len), every_(every) {}
  const char* name() const override { return "replay"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override {
    std::vector<int32_t> out;
    const size_t at = history.size() - prompt_len_;
    for (int i = 0; i < max_tokens && at + size_t(i) < truth_.size(); ++i) {
      int32_t t = truth_[at + size_t(i)];
      if (every_ > 0 && ++calls_ % every_ == 0) t += 1;  // refused by the chain (wrong residue)
      out.push_back(t);
    }
    return out;
  }

 private:
  std::vector<int32_t> truth_;
  size_t prompt_len_;
  int every_, calls_ = 0;
};

class ConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = testing::tiny_k3_spec();
    model::write_tiny_checkpoint(spec_, dir_ / "target");
    target_ = model::KimiModel::load(dir_ / "target");
  }
  runtime::GenerateResult run(GenerateOptions o, std::span<const int32_t> prompt) {
    auto st = target_->new_state();
    return runtime::generate(*target_, *st, prompt, o);
  }
  testing::TempDir dir_{"constraint"};
  model::TinySpec spec_;
  std::unique_ptr<model::KimiModel> target_;
  std::vector<int32_t> prompt_{5, 9, 17, 3, 5, 9, 17, 3, 22};
};

TEST_F(ConstraintTest, GreedyPicksTheBestAllowedTokenOfTheUnmaskedLogits) {
  const int64_t V = int64_t(spec_.vocab);
  ModChain chain(V);
  int checked = 0;
  int expected_state = 0;
  std::vector<int32_t> expected;
  GenerateOptions o{.max_new = 24, .stop_at_eos = false, .constraint = &chain};
  o.on_logits = [&](const float* logits, int64_t n) {
    ASSERT_EQ(n, V);
    int64_t best = -1;
    for (int64_t t = expected_state; t < V; t += 4)
      if (best < 0 || logits[t] > logits[best]) best = t;
    expected.push_back(int32_t(best));
    expected_state = int(best + 1) % 4;
    ++checked;
  };
  const auto r = run(o, prompt_);
  ASSERT_EQ(r.generated.size(), 24u);
  EXPECT_EQ(checked, 24);
  EXPECT_EQ(r.generated, expected);
  EXPECT_EQ(chain.accepted, r.generated);
  // Without the constraint the target's own choices break the chain somewhere: the mask mattered.
  ModChain free_chain(V);
  const auto unconstrained = run({.max_new = 24, .stop_at_eos = false}, prompt_);
  bool broken = false;
  int s = 0;
  for (int32_t t : unconstrained.generated) {
    broken |= t % 4 != s;
    s = (t + 1) % 4;
  }
  EXPECT_TRUE(broken);
}

TEST_F(ConstraintTest, DraftingChangesNothingAndTheConstraintFollowsTheKeptTokens) {
  ModChain ref_chain(int64_t(spec_.vocab));
  const auto ref = run({.max_new = 20, .stop_at_eos = false, .constraint = &ref_chain}, prompt_);
  for (int every : {0, 1, 3}) {
    for (int depth : {1, 3, 6}) {
      ReplayDrafter drafter(ref.generated, prompt_.size(), every);
      ModChain chain(int64_t(spec_.vocab));
      const auto r = run({.max_new = 20, .stop_at_eos = false, .drafter = &drafter, .fixed_depth = depth,
                          .constraint = &chain},
                         prompt_);
      EXPECT_EQ(r.generated, ref.generated) << "wrong every " << every << ", depth " << depth;
      EXPECT_EQ(chain.accepted, r.generated);
      EXPECT_EQ(chain.state(), (r.generated.back() + 1) % 4);
      if (every == 0) {
        EXPECT_EQ(r.accepted, r.proposed);
      }
      if (every == 1) {  // every draft refused by the chain: cut before any verify pass
        EXPECT_EQ(r.accepted, 0);
        EXPECT_EQ(r.proposed, 0);
      }
    }
  }
}

TEST_F(ConstraintTest, SampledTokensAreAlwaysAllowedWithAndWithoutDrafts) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    ModChain chain(int64_t(spec_.vocab));
    GenerateOptions o{.max_new = 30, .stop_at_eos = false, .constraint = &chain};
    o.sampling = {.temperature = 1.5, .seed = seed};
    const auto r = run(o, prompt_);
    EXPECT_EQ(chain.accepted, r.generated);  // accept() checks each against the chain
    ReplayDrafter drafter(r.generated, prompt_.size(), 2);
    ModChain chain2(int64_t(spec_.vocab));
    o.constraint = &chain2;
    o.drafter = &drafter;
    o.fixed_depth = 3;
    const auto r2 = run(o, prompt_);
    EXPECT_EQ(chain2.accepted, r2.generated);
    EXPECT_GT(chain2.masks, 0);
  }
}

// Log-probabilities: the log-softmax of the row each token was chosen from (checked against the
// logits the loop reports), over the allowed tokens under a constraint; greedy's token is the top
// one; drafted tokens report exactly what undrafted steps do.
TEST_F(ConstraintTest, LogprobsAreTheRowsLogSoftmaxOverTheAllowedTokensDraftedOrNot) {
  const int64_t V = int64_t(spec_.vocab);
  for (bool constrained : {false, true}) {
    SCOPED_TRACE(constrained ? "constrained" : "free");
    ModChain chain(V);
    std::vector<std::vector<float>> rows;
    std::vector<runtime::TokenLogprobs> seen;
    GenerateOptions o{.max_new = 12, .stop_at_eos = false, .constraint = constrained ? &chain : nullptr};
    o.on_logits = [&](const float* logits, int64_t n) { rows.emplace_back(logits, logits + n); };
    o.top_logprobs = 5;
    int state = 0;
    o.on_logprobs = [&](const runtime::TokenLogprobs& lp) {
      seen.push_back(lp);
      const std::vector<float>& row = rows.at(seen.size() - 1);
      double z = 0;
      for (int64_t t = 0; t < V; ++t)
        if (!constrained || t % 4 == state) z += std::exp(double(row[size_t(t)]));
      EXPECT_NEAR(lp.logprob, double(row[size_t(lp.token)]) - std::log(z), 1e-4);
      ASSERT_EQ(lp.top.size(), 5u);
      EXPECT_EQ(lp.top[0].first, lp.token);  // greedy chose the most likely (allowed) token
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      for (size_t i = 0; i < lp.top.size(); ++i) {
        if (constrained) {
          EXPECT_EQ(lp.top[i].first % 4, state);
        }
        if (i > 0) {
          EXPECT_GE(lp.top[i - 1].second, lp.top[i].second);
        }
      }
      state = (lp.token + 1) % 4;
    };
    const auto ref = run(o, prompt_);
    ASSERT_EQ(seen.size(), ref.generated.size());
    // With drafts (some wrong): the same tokens and bit for bit the same log-probabilities.
    ReplayDrafter drafter(ref.generated, prompt_.size(), 3);
    ModChain chain2(V);
    std::vector<runtime::TokenLogprobs> drafted;
    GenerateOptions d{.max_new = 12, .stop_at_eos = false, .drafter = &drafter, .fixed_depth = 3,
                      .constraint = constrained ? &chain2 : nullptr};
    d.top_logprobs = 5;
    d.on_logprobs = [&](const runtime::TokenLogprobs& lp) { drafted.push_back(lp); };
    const auto r = run(d, prompt_);
    EXPECT_GT(r.accepted, 0);
    ASSERT_EQ(drafted.size(), seen.size());
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(drafted[i].token, seen[i].token);
      EXPECT_EQ(drafted[i].logprob, seen[i].logprob) << i;
      EXPECT_EQ(drafted[i].top, seen[i].top) << i;
    }
  }
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// A grammar constraint's mask computed ahead on its own thread (prepare(), while a pass runs)
// equals the one computed when asked, step after step; end tokens only where the grammar may end,
// and nothing but them once it is finished. The one ahead walks in three shares (three threads),
// the one asked alone (a mask asked for on the step is never shared). (In the TSan build too: the
// threads' reads of the matcher race with nothing.)
TEST(GrammarConstraint, MasksComputedAheadEqualMasksComputedWhenAsked) {
  const std::vector<std::string> pieces = {"{", "}", "\"", "a", "b", "ab", ":", ",", " ", "1", "12", "\"a\"", "", ""};
  std::vector<std::string_view> views(pieces.begin(), pieces.end());
  std::vector<bool> special(views.size(), false);
  special[12] = special[13] = true;  // 12: a special token; 13: the end token
  auto vocab = std::make_shared<const guide::Vocabulary>(views, special);
  auto grammar = std::make_shared<const guide::Grammar>(guide::parse_gbnf(
      R"(root ::= "{" ( pair ( "," pair )* )? "}"
pair ::= "\"" [ab]+ "\"" ":" " "? [0-9]+)"));
  runtime::GrammarConstraint ahead(vocab, grammar, {13}, -1, 3, 0), asked(vocab, grammar, {13}, -1, 3, 0);
  std::vector<uint64_t> a(1), b(1);
  uint64_t rng = 7;
  int steps = 0;
  for (; steps < 200; ++steps) {
    ahead.prepare();
    ahead.allowed(a);
    asked.allowed(b);
    ASSERT_EQ(a, b) << "step " << steps;
    // Pick an allowed token at random, the end token only at the end of the walk.
    std::vector<int32_t> ok;
    for (int32_t t = 0; t < 13; ++t)
      if (runtime::bit(a, t)) ok.push_back(t);
    if (ok.empty() || steps > 60) {
      ASSERT_TRUE(runtime::bit(a, 13) || !ok.empty());
      if (runtime::bit(a, 13)) break;
    }
    EXPECT_FALSE(runtime::bit(a, 12));  // a special token no terminal names
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t t = ok.empty() ? 13 : ok[size_t((rng >> 33) % ok.size())];
    ahead.accept(t);
    asked.accept(t);
  }
  EXPECT_GT(steps, 3);
  EXPECT_EQ(ahead.mask_parts(), 3);
  EXPECT_EQ(asked.mask_parts(), 3);
  // Masks computed ahead are shared (every walk here, at threshold 0); masks asked for on the step
  // walk alone, however many shares the constraint has.
  EXPECT_GT(ahead.shared_walks(), 0u);
  EXPECT_EQ(asked.shared_walks(), 0u);
  EXPECT_TRUE(ahead.complete());
  ahead.accept(13);
  ahead.allowed(a);
  EXPECT_EQ(a[0], uint64_t(1) << 13);  // after the end, only the end
}

}  // namespace
}  // namespace sluice
