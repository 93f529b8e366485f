// Drafting never changes the output: greedy tokens with every drafter (prompt lookup, a draft
// model, drafting through text with a draft of another tokenizer, an oracle that is right or
// wrong on purpose), fixed depths and the controller, resident or streamed experts, equal
// drafting off token for token; --draft specs build the right drafter; speculative sampling keeps
// the target's distribution (two-sample chi-square over many seeded runs).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/durable_file.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/speculate/make_drafter.h"
#include "runtime/speculate/model_drafter.h"
#include "model/arch/qwen3.h"
#include "runtime/speculate/text_drafter.h"
#include "store/prepare.h"
#include "text_draft_util.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace {

using runtime::Drafter;
using runtime::GenerateOptions;

// Proposes the continuation of a known sequence, corrupting some tokens on purpose.
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> truth, size_t prompt_len, int every, int32_t vocab)
      : truth_(std::move(truth)), prompt_len_(prompt_len), every_(every), vocab_(vocab) {}
  const char* name() const override { return "oracle"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override {
    std::vector<int32_t> out;
    size_t at = history.size() - prompt_len_;  // index of the next generated token
    for (int i = 0; i < max_tokens && at + size_t(i) < truth_.size(); ++i) {
      int32_t t = truth_[at + size_t(i)];
      if (every_ > 0 && ++calls_ % every_ == 0) t = (t + 1) % vocab_;
      out.push_back(t);
    }
    return out;
  }

 private:
  std::vector<int32_t> truth_;
  size_t prompt_len_;
  int every_;
  int32_t vocab_;
  int calls_ = 0;
};

// Always proposes the same tokens (a proposal distribution far from the target's).
class ConstantDrafter : public Drafter {
 public:
  const char* name() const override { return "constant"; }
  std::vector<int32_t> propose(std::span<const int32_t>, int max_tokens) override {
    return std::vector<int32_t>(size_t(max_tokens), 3);
  }
};

std::vector<int32_t> make_prompt(int n, int salt, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((i * 29 + salt * 13 + 1) % (vocab - 8)));
  // Repeat a chunk so prompt lookup finds matches.
  for (int i = 0; i < n / 2; ++i) p.push_back(p[size_t(i)]);
  return p;
}

class DraftEquality : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    spec_ = GetParam() == 0 ? testing::tiny_k3_spec() : testing::tiny_linear_spec();
    model::write_tiny_checkpoint(spec_, dir_ / "target");
    model::TinySpec d = spec_;
    d.seed += 100;
    d.layers = 3;
    d.mla_layers = {3};
    model::write_tiny_checkpoint(d, dir_ / "draft");
    target_ = model::KimiModel::load(dir_ / "target");
  }
  std::vector<int32_t> run(std::span<const int32_t> prompt, int n, Drafter* drafter, int depth) {
    auto st = target_->new_state();
    GenerateOptions o{.max_new = n, .stop_at_eos = false, .drafter = drafter, .fixed_depth = depth};
    return runtime::generate(*target_, *st, prompt, o).generated;
  }
  testing::TempDir dir_{"draft"};
  model::TinySpec spec_;
  std::unique_ptr<model::KimiModel> target_;
};

TEST_P(DraftEquality, GreedyTokensAreIdenticalWithEveryDrafter) {
  runtime::ModelDrafter model_drafter(model::KimiModel::load(dir_ / "draft"), spec_.vocab);
  int checked = 0;
  for (int salt = 0; salt < 6; ++salt) {
    auto prompt = make_prompt(6 + 3 * salt, salt, int(spec_.vocab));
    for (int n : {1, 5, 17}) {
      auto ref = run(prompt, n, nullptr, -1);
      ASSERT_EQ(ref.size(), size_t(n));
      runtime::NgramDrafter ngram;
      OracleDrafter right(ref, prompt.size(), 0, int32_t(spec_.vocab));
      OracleDrafter wrong(ref, prompt.size(), 3, int32_t(spec_.vocab));
      for (Drafter* d : std::initializer_list<Drafter*>{&ngram, &model_drafter, &right, &wrong}) {
        for (int depth : {-1, 1, 3, 8}) {
          EXPECT_EQ(run(prompt, n, d, depth), ref) << d->name() << " depth " << depth << " prompt " << salt << " n " << n;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 3 * 4 * 4);
}

TEST_P(DraftEquality, OracleDraftsAreAcceptedAndWrongOnesRejected) {
  auto prompt = make_prompt(8, 1, int(spec_.vocab));
  auto ref = run(prompt, 20, nullptr, -1);
  OracleDrafter right(ref, prompt.size(), 0, int32_t(spec_.vocab));
  auto st = target_->new_state();
  auto r = runtime::generate(*target_, *st, prompt, {.max_new = 20, .stop_at_eos = false, .drafter = &right, .fixed_depth = 4});
  EXPECT_EQ(r.generated, ref);
  EXPECT_EQ(r.accepted, r.proposed);  // every right draft is accepted
  EXPECT_LE(r.steps, 6);              // 20 tokens in about 20/5 steps

  OracleDrafter wrong(ref, prompt.size(), 1, int32_t(spec_.vocab));  // every draft wrong
  auto st2 = target_->new_state();
  auto r2 = runtime::generate(*target_, *st2, prompt, {.max_new = 20, .stop_at_eos = false, .drafter = &wrong, .fixed_depth = 4});
  EXPECT_EQ(r2.generated, ref);
  EXPECT_EQ(r2.accepted, 0);
}

INSTANTIATE_TEST_SUITE_P(Arch, DraftEquality, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "kimi_k3" : "kimi_linear"; });

TEST(DraftStreamed, StreamedVerifyPassesGiveTheResidentTokens) {
  testing::TempDir dir("draft-stream");
  auto prompt = make_prompt(10, 4, int(testing::streamed_tiny_spec().vocab));
  auto t = testing::streamed_tiny(dir, prompt, 16);
  const auto& ref = t.ref;
  auto& e = t.engine;
  ASSERT_TRUE(e->streaming());
  OracleDrafter wrong(ref, prompt.size(), 3, int32_t(t.spec.vocab));
  auto st = e->model().new_state();
  auto r = runtime::generate(e->model(), *st, prompt, {.max_new = 16, .stop_at_eos = false, .drafter = &wrong, .fixed_depth = 5});
  EXPECT_EQ(r.generated, ref);
  EXPECT_GT(r.accepted, 0);
}

// The default target (K3 architecture, tiktoken BPE) with drafts of another tokenizer.
class TextDraftEquality : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = model::KimiModel::load(testing::kDefaultTarget);
    tok_ = tokenizer::load_tokenizer(testing::kDefaultTarget);
    ASSERT_NE(tok_, nullptr);
    const int32_t bos = *tok_->special_id("[BOS]"), end = *tok_->special_id("<|end_of_msg|>");
    auto text = [&](std::vector<int32_t> ids, const std::string& t) {
      tok_->encode_into(t, ids);
      return ids;
    };
    prompts_ = {text({}, "And God said, Let there be light"), text({bos}, "In the beginning"),
                text(text({bos}, "Who divided the light from the darkness?"), ""), text({}, "x")};
    prompts_[2].push_back(end);
    tok_->encode_into("And", prompts_[2]);
  }
  std::vector<int32_t> run(std::span<const int32_t> prompt, int n, Drafter* drafter, int depth,
                           runtime::GenerateResult* out = nullptr) {
    auto st = target_->new_state();
    GenerateOptions o{.max_new = n, .stop_at_eos = false, .drafter = drafter, .fixed_depth = depth};
    auto r = runtime::generate(*target_, *st, prompt, o);
    if (out) *out = r;
    return r.generated;
  }
  // Greedy tokens with `drafter` equal drafting off for every prompt, length and depth.
  void expect_same_tokens(Drafter& drafter, const std::vector<int>& lengths, const std::vector<int>& depths) {
    for (size_t p = 0; p < prompts_.size(); ++p)
      for (int n : lengths) {
        auto ref = run(prompts_[p], n, nullptr, -1);
        for (int depth : depths) EXPECT_EQ(run(prompts_[p], n, &drafter, depth), ref) << "prompt " << p << " n " << n << " depth " << depth;
      }
  }
  std::unique_ptr<model::KimiModel> target_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_F(TextDraftEquality, RandomQwen3DraftChangesNothing) {
  testing::TempDir dir("text-draft");
  testing::write_text_draft(dir / "qwen3");
  auto drafter = runtime::make_drafter("model:" + (dir / "qwen3"), *target_, testing::kDefaultTarget, tok_.get());
  ASSERT_STREQ(drafter->name(), "text");
  expect_same_tokens(*drafter, {1, 5, 17}, {-1, 1, 3, 8});
  EXPECT_GT(static_cast<runtime::TextDrafter&>(*drafter).counters().proposed, 0);
}

TEST_F(TextDraftEquality, KimiDraftWithItsOwnTokenizerDraftsThroughText) {
  testing::TempDir dir("text-draft-kimi");
  model::TinySpec s = testing::tiny_linear_spec();
  s.vocab = testing::draft_tokenizer()->vocab_size() + 8;
  model::write_tiny_checkpoint(s, dir / "kimi");
  write_file_durably(dir / "kimi/tokenizer.json", testing::draft_tokenizer_json());
  auto drafter = runtime::make_drafter("model:" + (dir / "kimi"), *target_, testing::kDefaultTarget, tok_.get());
  ASSERT_STREQ(drafter->name(), "text");
  expect_same_tokens(*drafter, {9}, {-1, 3});
}

TEST_F(TextDraftEquality, DraftThatKnowsTheTextIsAcceptedAndChangesNothing) {
  int64_t proposed = 0, accepted = 0;
  for (const auto& prompt : prompts_) {
    auto ref = run(prompt, 24, nullptr, -1);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), ref.begin(), ref.end());
    // The draft continues the target's own greedy text; specials stop it.
    std::string truth;
    std::vector<size_t> stops;
    for (int32_t id : all) {
      if (tok_->is_special(id)) stops.push_back(truth.size());
      truth += tok_->token_bytes(id);
    }
    for (int depth : {-1, 2, 6}) {
      runtime::TextDrafter drafter(std::make_unique<testing::ScriptedTextLm>(truth, stops), testing::draft_tokenizer(),
                                   *tok_, testing::scripted_options());
      runtime::GenerateResult r;
      EXPECT_EQ(run(prompt, 24, &drafter, depth, &r), ref) << "depth " << depth;
      proposed += r.proposed;
      accepted += r.accepted;
    }
  }
  std::printf("[text draft] a draft that knows the text: %lld of %lld proposals accepted\n", (long long)accepted,
              (long long)proposed);
  EXPECT_GT(accepted, proposed / 2);
}

TEST_F(TextDraftEquality, TrainedQwen3DraftChangesNothing) {
  const std::string dir = std::string(SLUICE_SOURCE_DIR) + "/models/default/draft-qwen3";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not present yet";
  auto drafter = runtime::make_drafter("model:" + dir, *target_, testing::kDefaultTarget, tok_.get());
  ASSERT_STREQ(drafter->name(), "text");
  int64_t proposed = 0, accepted = 0;
  for (const auto& prompt : prompts_) {
    auto ref = run(prompt, 32, nullptr, -1);
    for (int depth : {-1, 4}) {
      runtime::GenerateResult r;
      EXPECT_EQ(run(prompt, 32, drafter.get(), depth, &r), ref) << "depth " << depth;
      proposed += r.proposed;
      accepted += r.accepted;
    }
  }
  std::printf("[text draft] trained qwen3 draft: %lld of %lld proposals accepted\n", (long long)accepted,
              (long long)proposed);
  EXPECT_GT(accepted, 0);
}

// After a long pause (drafting off) a draft model restarts from a recent window: its proposal
// is then exactly that of a fresh drafter given only that window, and the cost of catching up
// is bounded by the window, not by the pause.
TEST(DraftPause, ModelDrafterRestartsFromTheRecentWindow) {
  const std::string dir = std::string(SLUICE_SOURCE_DIR) + "/models/default/draft";
  std::vector<int32_t> history;
  for (int i = 0; i < 300; ++i) history.push_back(int32_t((i * 37 + 11) % 4000));
  runtime::ModelDrafter paused(model::KimiModel::load(dir), 4352);
  paused.catch_up(std::span<const int32_t>(history).first(20));
  const auto p_paused = paused.propose(history, 5);  // 279 tokens since: a pause
  // A fresh drafter whose whole history is the window (64 tokens) plus the pending token.
  runtime::ModelDrafter fresh(model::KimiModel::load(dir), 4352);
  const std::span<const int32_t> window = std::span<const int32_t>(history).last(65);
  EXPECT_EQ(p_paused, fresh.propose(window, 5));
  // A short gap is consumed normally: same proposal as a drafter that saw everything.
  runtime::ModelDrafter steady(model::KimiModel::load(dir), 4352), whole(model::KimiModel::load(dir), 4352);
  steady.catch_up(std::span<const int32_t>(history).first(290));
  EXPECT_EQ(steady.propose(history, 5), whole.propose(history, 5));
}

TEST_F(TextDraftEquality, PausedTextDrafterRestartsFromAWindowAndChangesNothing) {
  // A random Qwen3 draft with a tiny pause window: the controller turns it off, its probes then
  // restart the draft from the window, and greedy output is still the target's.
  testing::TempDir dir("text-draft-pause");
  testing::write_text_draft(dir / "qwen3", 9);
  runtime::TextDrafterOptions o;
  o.pause_window = 8;
  runtime::TextDrafter drafter(runtime::make_draft_lm(model::Qwen3Model::load(dir / "qwen3")),
                               testing::draft_tokenizer(), *tok_, o);
  expect_same_tokens(drafter, {80}, {-1});
  // Asked directly after a long gap, it restarts from the window.
  const int64_t before = drafter.counters().window_restarts;
  auto ref = run(prompts_[0], 60, nullptr, -1);
  std::vector<int32_t> h(prompts_[0]);
  h.insert(h.end(), ref.begin(), ref.end());
  drafter.propose(std::span<const int32_t>(h).first(prompts_[0].size() + 2), 3);
  drafter.propose(h, 3);
  EXPECT_EQ(drafter.counters().window_restarts, before + 1);
}

TEST(MakeDrafter, PicksTheDrafterFromTheSpecAndDirectory) {
  auto target = model::KimiModel::load(testing::kDefaultTarget);
  auto target_tok = tokenizer::load_tokenizer(testing::kDefaultTarget);
  auto make = [&](const std::string& spec, const tokenizer::Tokenizer* tok) {
    return runtime::make_drafter(spec, *target, testing::kDefaultTarget, tok);
  };
  auto error_of = [&](const std::string& spec, const tokenizer::Tokenizer* tok) -> std::string {
    try {
      make(spec, tok);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(make("off", target_tok.get()), nullptr);
  EXPECT_STREQ(make("ngram", nullptr)->name(), "ngram");
  const std::string same = std::string(SLUICE_SOURCE_DIR) + "/models/default/draft";
  EXPECT_STREQ(make("model:" + same, target_tok.get())->name(), "model");
  EXPECT_STREQ(make("model:" + same, nullptr)->name(), "model");
  testing::TempDir dir("make-drafter");
  testing::write_text_draft(dir / "q");
  EXPECT_NE(error_of("model:" + (dir / "q"), nullptr).find("has no tokenizer"), std::string::npos);
  std::filesystem::remove(dir / "q/tokenizer.json");
  EXPECT_NE(error_of("model:" + (dir / "q"), target_tok.get()).find("q: no tokenizer"), std::string::npos);
  write_file_durably(dir / "q/config.json", R"({"model_type": "llama"})");
  EXPECT_NE(error_of("model:" + (dir / "q"), target_tok.get()).find("model_type 'llama' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("bogus", target_tok.get()).find("'bogus' is not off, ngram, model:DIR or dspark:DIR"), std::string::npos);
  EXPECT_NE(error_of("model:", target_tok.get()).find("needs a directory"), std::string::npos);
}

// Two-sample chi-square with Wilson-Hilferty's critical value at p = 0.001.
void expect_same_distribution(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, const char* what) {
  std::map<int32_t, std::pair<int, int>> bins;
  for (auto [k, v] : a) bins[k].first += v;
  for (auto [k, v] : b) bins[k].second += v;
  double chi = 0;
  int df = -1;
  for (auto [k, ab] : bins) {
    chi += double(ab.first - ab.second) * (ab.first - ab.second) / double(ab.first + ab.second);
    ++df;
  }
  ASSERT_GT(df, 0);
  double z = 3.09, h = 2.0 / (9.0 * df);
  double critical = df * std::pow(1 - h + z * std::sqrt(h), 3);
  EXPECT_LT(chi, critical) << what << ": chi-square " << chi << " with " << df << " degrees of freedom";
}

TEST(SpeculativeSampling, KeepsTheTargetDistribution) {
  testing::TempDir dir("sampling");
  model::TinySpec s = testing::tiny_k3_spec();
  s.vocab = 24;
  s.hidden = 32;
  s.layers = 4;
  s.mla_layers = {4};
  s.block = 2;
  s.experts = 8;
  s.top_k = 2;
  s.shards = 1;
  model::write_tiny_checkpoint(s, dir / "m");
  auto m = model::KimiModel::load(dir / "m");
  const std::vector<int32_t> prompt = {5, 9, 2, 7};
  const int runs = 2500;
  std::map<int32_t, int> off1, off2, on1, on2, on3, off3;
  ConstantDrafter constant;
  for (int i = 0; i < runs; ++i) {
    GenerateOptions o{.max_new = 3, .stop_at_eos = false};
    o.sampling = {.temperature = 1.3, .top_p = 0.95, .top_k = 12, .seed = uint64_t(i)};
    auto st = m->new_state();
    auto a = runtime::generate(*m, *st, prompt, o).generated;
    o.drafter = &constant;
    o.fixed_depth = 2;
    o.sampling.seed = uint64_t(1000000 + i);
    auto st2 = m->new_state();
    auto b = runtime::generate(*m, *st2, prompt, o).generated;
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    off1[a[0]]++, off2[a[1]]++, off3[a[2]]++;
    on1[b[0]]++, on2[b[1]]++, on3[b[2]]++;
  }
  expect_same_distribution(off1, on1, "first token");
  expect_same_distribution(off2, on2, "second token (drafted)");
  expect_same_distribution(off3, on3, "third token (drafted)");
  // The test has power: the drafter's own proposal (always 3) is far from the target's.
  EXPECT_LT(on2[3], runs / 2);
}

}  // namespace
}  // namespace sluice
