// The K3 DSpark drafter: config and roster refusals, parity with the plain PyTorch reference
// (tools/reference/dspark_ref.py, fixtures in tests/fixtures/dspark_tiny*), the hidden-row capture
// of the target, a draft cache that always equals one rebuilt from the committed rows, and greedy
// output with DSpark drafting equal to drafting off (resident and streamed experts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "model/arch/dspark_config.h"
#include "format/json_util.h"
#include "format/safetensors.h"
#include "model/arch/dspark.h"
#include "model/arch/kimi.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/speculate/dspark_drafter.h"
#include "store/prepare.h"

namespace sluice {
namespace {

using nlohmann::json;

std::string fixture_dir(const std::string& name) { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + name; }

model::KimiConfig tiny_target_config() {
  return model::parse_kimi_config(model::tiny_config_json(testing::tiny_k3_spec()), "target");
}

std::string config_error(const json& j) {
  try {
    model::parse_dspark_config(j.dump(), "ds.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DSparkConfig, TinyConfigParsesWithK3RopeConstants) {
  auto c = model::parse_dspark_config(model::tiny_dspark_config_json({}, tiny_target_config()), "ds");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(c.context_width(), 3 * 64);
  EXPECT_EQ(c.num_draft_tokens, 7);
  // K3's DSpark: (128+64)^-0.5 · mscale(32, 1)² with mscale = 0.1·ln 32 + 1 ≈ 1.3466 (spec §5.2's 1.8133 is its square).
  model::DSparkConfig k3 = c;
  k3.qk_nope_head_dim = 128;
  k3.qk_rope_head_dim = 64;
  EXPECT_NEAR(model::dspark_softmax_scale(k3), std::pow(192.0, -0.5) * 1.8133, 1e-4);
  EXPECT_DOUBLE_EQ(model::dspark_rope_magnitude(c), 1.0);
  // YaRN: the highest-frequency pair keeps θ^0 = 1, the lowest is interpolated (÷ factor) fully
  // when the ramp reaches it, and every frequency lies between the two regimes.
  auto inv = model::dspark_inv_freq(k3);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[31], std::pow(50000.0, -62.0 / 64) / 32.0, 1e-15);
  for (size_t i = 0; i < inv.size(); ++i) {
    double extra = std::pow(50000.0, -2.0 * double(i) / 64);
    EXPECT_LE(inv[i], extra * (1 + 1e-12));
    EXPECT_GE(inv[i], extra / 32 * (1 - 1e-12));
  }
}

TEST(DSparkConfig, RefusalsNameTheField) {
  const json good = json::parse(model::tiny_dspark_config_json({}, tiny_target_config()));
  ASSERT_EQ(config_error(good), "");
  struct Case {
    std::function<void(json&)> edit;
    std::string want;
  };
  std::vector<Case> cases = {
      {[](json& j) { j["architectures"] = {"Qwen3ForCausalLM"}; }, "K3DSparkModel"},
      {[](json& j) { j.erase("hidden_size"); }, "hidden_size"},
      {[](json& j) { j["num_attention_heads"] = 0; }, "num_attention_heads"},
      {[](json& j) { j["qk_rope_head_dim"] = 7; }, "qk_rope_head_dim must be even"},
      {[](json& j) { j["mask_token_id"] = 512; }, "mask_token_id 512 is outside the vocabulary"},
      {[](json& j) { j["target_layer_ids"] = json::array(); }, "target_layer_ids is empty"},
      {[](json& j) { j["target_layer_ids"] = {3, 3}; }, "strictly increasing"},
      {[](json& j) { j["target_layer_ids"] = {-1, 3}; }, "negative"},
      {[](json& j) { j["num_draft_tokens"] = 0; }, "num_draft_tokens"},
      {[](json& j) { j["num_draft_tokens"] = 40; }, "num_draft_tokens 40"},
      {[](json& j) { j["rope_scaling"]["type"] = "linear"; }, "YaRN"},
      {[](json& j) { j["rope_scaling"].erase("factor"); }, "rope_scaling"},
      {[](json& j) { j["rope_scaling"]["beta_slow"] = 64.0; }, "beta_fast"},
      {[](json& j) { j.erase("rope_theta"); }, "rope_theta"},
      {[](json& j) { j["markov_head_type"] = "gated"; }, "markov_head_type 'gated'"},
      {[](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu'"},
      {[](json& j) { j["markov_rank"] = "16"; }, "markov_rank"},
  };
  for (const Case& c : cases) {
    json j = good;
    c.edit(j);
    std::string err = config_error(j);
    EXPECT_NE(err.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << err;
    EXPECT_EQ(err.rfind("ds.json", 0), 0u) << err;
  }
}

// Writes a tiny K3 target and a DSpark drafter for it; edits rewrite the drafter's files.
class DSparkLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    model::write_tiny_checkpoint(testing::tiny_k3_spec(), dir_ / "target");
    target_ = model::KimiModel::load(dir_ / "target");
    model::write_tiny_dspark({}, target_->config(), dir_ / "ds");
  }
  std::string load_error() {
    try {
      model::DSparkModel::load(dir_ / "ds", *target_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void edit_config(const std::function<void(json&)>& edit) {
    json j = format::read_json_file(dir_ / "ds/config.json");
    edit(j);
    write_file_durably(dir_ / "ds/config.json", j.dump(2));
  }
  // Rewrites model.safetensors through `edit` on the list of tensors.
  void edit_tensors(const std::function<void(std::vector<format::TensorToWrite>&)>& edit) {
    std::vector<format::TensorToWrite> ts;
    {
      auto set = format::TensorSet::open_dir(dir_ / "ds");
      for (const auto& [name, t] : set.all())
        ts.push_back({name, t->dtype, t->shape, std::vector<std::byte>(t->data, t->data + t->nbytes)});
    }
    edit(ts);
    format::write_safetensors(dir_ / "ds/model.safetensors", ts);
  }
  testing::TempDir dir_{"dspark-load"};
  std::unique_ptr<model::KimiModel> target_;
};

TEST_F(DSparkLoad, AcceptsTheTinyDrafter) {
  EXPECT_EQ(load_error(), "");
  EXPECT_EQ(model::dspark_tensors(model::load_dspark_config(dir_ / "ds"), nullptr).specs().size(), 2u + 2 * 12 + 1 + 2 + 2 + 1);
}

TEST_F(DSparkLoad, RosterOfK3HasSixtyEightTensors) {
  json j = json::parse(model::tiny_dspark_config_json({}, tiny_target_config()));
  j["num_hidden_layers"] = 5;
  j["target_layer_ids"] = {2, 23, 47, 71, 89};
  auto c = model::parse_dspark_config(j.dump(), "k3");
  EXPECT_EQ(model::dspark_tensors(c, nullptr).specs().size(), 68u);
}

TEST_F(DSparkLoad, RefusesAMismatchedTarget) {
  edit_config([](json& j) { j["hidden_size"] = 96; });
  EXPECT_NE(load_error().find("hidden_size 96 differs from the target's 64"), std::string::npos) << load_error();
  SetUp();
  edit_config([](json& j) { j["vocab_size"] = 1024; });
  EXPECT_NE(load_error().find("vocab_size 1024 differs"), std::string::npos) << load_error();
  SetUp();
  edit_config([](json& j) { j["target_layer_ids"] = {1, 9}; });
  EXPECT_NE(load_error().find("target_layer_ids names layer 9 but the target has layers 0..8"), std::string::npos)
      << load_error();
}

TEST_F(DSparkLoad, RefusesABadRoster) {
  edit_config([](json& j) { j["intermediate_size"] = 96; });
  EXPECT_NE(load_error().find("layers.0.mlp.gate_proj.weight has shape [128, 64], config implies [96, 64]"),
            std::string::npos)
      << load_error();
  SetUp();
  edit_tensors([](std::vector<format::TensorToWrite>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "markov_head.markov_w2.weight"; }),
             ts.end());
  });
  EXPECT_NE(load_error().find("markov_head.markov_w2.weight"), std::string::npos) << load_error();
  SetUp();
  edit_tensors([](std::vector<format::TensorToWrite>& ts) {
    ts.push_back({"markov_head.gate_proj.weight", DType::BF16, {16, 80}, std::vector<std::byte>(16 * 80 * 2)});
  });
  EXPECT_NE(load_error().find("markov_head.gate_proj.weight is not part of the K3 DSpark roster"), std::string::npos)
      << load_error();
  SetUp();
  edit_tensors([](std::vector<format::TensorToWrite>& ts) {
    for (auto& t : ts)
      if (t.name == "final_norm.weight") {
        t.dtype = DType::I16;
      }
  });
  EXPECT_NE(load_error().find("final_norm.weight has dtype I16"), std::string::npos) << load_error();
}

// ---- parity with the reference ----

struct Fixture {
  std::unique_ptr<format::SafetensorsFile> file;
  const format::TensorInfo* find(const std::string& name) const {
    for (const auto& t : file->tensors())
      if (t.name == name) return &t;
    return nullptr;
  }
  template <typename T>
  std::vector<T> get(const std::string& name) const {
    const format::TensorInfo* t = find(name);
    if (!t) fail("fixture lacks ", name);
    std::vector<T> out(t->nbytes / sizeof(T));
    std::memcpy(out.data(), t->data, t->nbytes);
    return out;
  }
};

double max_rel_err(const float* got, const float* want, size_t n) {
  double scale = 0, err = 0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, std::fabs(double(want[i])));
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
  }
  return err / std::max(scale, 1e-30);
}

class DSparkGolden : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(DSparkGolden, ContextRowsLogitsTokensAndConfidencesMatchTheReference) {
  const auto& [target_name, ds_name] = GetParam();
  const std::string ds_dir = fixture_dir(ds_name);
  ASSERT_TRUE(std::filesystem::exists(ds_dir + "/expected.safetensors")) << "missing fixture " << ds_dir;
  auto target = model::KimiModel::load(fixture_dir(target_name));
  auto ds = model::DSparkModel::load(ds_dir, *target);
  const auto& c = ds->config();
  const int64_t W = c.context_width(), V = c.vocab_size, D = c.num_draft_tokens;
  Fixture fx{format::SafetensorsFile::open(ds_dir + "/expected.safetensors")};
  int histories = 0;
  double worst_rows = 0, worst_logits = 0, worst_conf = 0;
  for (int i = 0; fx.find("history_ids_" + std::to_string(i)); ++i, ++histories) {
    const std::string k = std::to_string(i);
    auto ids = fx.get<int32_t>("history_ids_" + k);
    const int64_t L = int64_t(ids.size()) - 1;
    ds->truncate(0);
    if (L > 0) {
      // The target's own captured rows (checked against the reference's) feed the drafter.
      auto want_rows = fx.get<float>("context_rows_" + k);
      ASSERT_EQ(want_rows.size(), size_t(L * W));
      std::vector<float> rows(static_cast<size_t>(L * W)), logits(static_cast<size_t>(V));
      model::HiddenCapture cap{c.target_layer_ids, rows.data()};
      auto st = target->new_state();
      target->forward(*st, std::span<const int32_t>(ids.data(), size_t(L)), {.capture = &cap}, logits.data());
      double e = max_rel_err(rows.data(), want_rows.data(), rows.size());
      worst_rows = std::max(worst_rows, e);
      EXPECT_LE(e, 1e-4) << ds_name << " history " << i << ": captured target rows";
      ds->append_context(rows.data(), L);
    }
    ASSERT_EQ(ds->context_length(), L);
    std::vector<float> logits;
    model::DSparkProposal p = ds->propose(ids.back(), int(D), 0.0, &logits);
    auto want_logits = fx.get<float>("draft_logits_" + k);
    ASSERT_EQ(logits.size(), want_logits.size());
    for (int64_t j = 0; j < D; ++j) {
      double e = max_rel_err(logits.data() + j * V, want_logits.data() + j * V, size_t(V));
      worst_logits = std::max(worst_logits, e);
      EXPECT_LE(e, 1e-4) << ds_name << " history " << i << " row " << j << ": draft logits";
    }
    EXPECT_EQ(p.tokens, fx.get<int32_t>("draft_tokens_" + k)) << ds_name << " history " << i;
    auto want_conf = fx.get<float>("confidence_" + k);
    ASSERT_EQ(p.confidence.size(), want_conf.size());
    for (size_t j = 0; j < want_conf.size(); ++j) {
      double e = std::fabs(double(p.confidence[j]) - want_conf[j]) / std::max(1.0, std::fabs(double(want_conf[j])));
      worst_conf = std::max(worst_conf, e);
      EXPECT_LE(e, 1e-4) << ds_name << " history " << i << " confidence " << j;
    }
    // The proposal left the cache as it was (query rows are never cached).
    EXPECT_EQ(ds->context_length(), L);
  }
  EXPECT_GE(histories, 3);
  std::printf("[golden] %s: %d histories, max rel err: context rows %.3g, draft logits %.3g, confidence %.3g\n",
              ds_name.c_str(), histories, worst_rows, worst_logits, worst_conf);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DSparkGolden,
                         ::testing::Values(std::make_pair(std::string("k3_tiny_a"), std::string("dspark_tiny")),
                                           std::make_pair(std::string("k3_tiny_b"), std::string("dspark_tiny_b"))),
                         [](const auto& i) { return i.param.second; });

// Compares the first `n` cached positions of two drafters bit for bit.
void expect_same_cache(const model::DSparkModel& a, const model::DSparkModel& b, int64_t n, const std::string& what) {
  const auto& c = a.config();
  ASSERT_GE(a.context_length(), n);
  ASSERT_GE(b.context_length(), n);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    EXPECT_EQ(0, std::memcmp(a.cache_latent(i).data(), b.cache_latent(i).data(), size_t(n * c.kv_lora_rank) * 4))
        << what << ": layer " << i << " latents differ";
    EXPECT_EQ(0, std::memcmp(a.cache_k_pe(i).data(), b.cache_k_pe(i).data(), size_t(n * c.qk_rope_head_dim) * 4))
        << what << ": layer " << i << " k_pe differ";
  }
}

// Target rows of `tokens` captured in one pass.
std::vector<float> target_rows(model::KimiModel& target, const model::DSparkConfig& c, std::span<const int32_t> tokens) {
  std::vector<float> rows(tokens.size() * size_t(c.context_width()));
  std::vector<float> logits(static_cast<size_t>(target.config().vocab_size));
  model::HiddenCapture cap{c.target_layer_ids, rows.data()};
  auto st = target.new_state();
  target.forward(*st, tokens, {.capture = &cap}, logits.data());
  return rows;
}

TEST(DSparkCache, ContextInPiecesEqualsContextAtOnce) {
  auto target = model::KimiModel::load(fixture_dir("k3_tiny_a"));
  auto a = model::DSparkModel::load(fixture_dir("dspark_tiny"), *target);
  auto b = model::DSparkModel::load(fixture_dir("dspark_tiny"), *target);
  std::vector<int32_t> ids;
  for (int i = 0; i < 150; ++i) ids.push_back(int32_t((i * 37 + 11) % 500));  // past the initial capacity
  auto rows = target_rows(*target, a->config(), ids);
  const int64_t W = a->config().context_width();
  a->append_context(rows.data(), 150);
  for (int64_t at = 0, step = 1; at < 150; at += step, step = step % 7 + 1)
    b->append_context(rows.data() + at * W, std::min<int64_t>(step, 150 - at));
  expect_same_cache(*a, *b, 150, "pieces");
  auto pa = a->propose(ids.back(), 7), pb = b->propose(ids.back(), 7);
  EXPECT_EQ(pa.tokens, pb.tokens);
  // Rolling back and re-appending gives the same cache again.
  b->truncate(40);
  b->append_context(rows.data() + 40 * W, 110);
  expect_same_cache(*a, *b, 150, "truncate + append");
}

// ---- the drafter in the generation loop ----

std::vector<int32_t> prompt_of(int n, int salt, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((i * 31 + salt * 17 + 3) % (vocab - 8)));
  return p;
}

// Keeps its DSpark cache in step like the real drafter (and runs it) but proposes the known
// continuation, corrupted every third call: hand-overs of every accepted length get exercised.
class OracleDSpark : public runtime::DSparkDrafter {
 public:
  OracleDSpark(std::unique_ptr<model::DSparkModel> m, std::vector<int32_t> truth, size_t prompt_len)
      : DSparkDrafter(std::move(m)), truth_(std::move(truth)), prompt_len_(prompt_len) {}
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override {
    DSparkDrafter::propose(history, max_tokens);
    std::vector<int32_t> out;
    const size_t at = history.size() - prompt_len_;
    for (int i = 0; i < max_tokens && at + size_t(i) < truth_.size(); ++i) out.push_back(truth_[at + size_t(i)]);
    if (++calls_ % 3 == 0 && out.size() > 1) out[out.size() / 2] ^= 1;
    return out;
  }

 private:
  std::vector<int32_t> truth_;
  size_t prompt_len_;
  int calls_ = 0;
};

class DSparkDraftEquality : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    spec_ = GetParam() == 0 ? testing::tiny_k3_spec() : testing::tiny_linear_spec();
    model::write_tiny_checkpoint(spec_, dir_ / "target");
    target_ = model::KimiModel::load(dir_ / "target");
    model::write_tiny_dspark({}, target_->config(), dir_ / "ds");
  }
  runtime::GenerateResult run(std::span<const int32_t> prompt, int n, runtime::Drafter* d, int depth) {
    auto st = target_->new_state();
    runtime::GenerateOptions o{.max_new = n, .stop_at_eos = false, .drafter = d, .fixed_depth = depth};
    auto r = runtime::generate(*target_, *st, prompt, o);
    last_length_ = st->length();
    return r;
  }
  testing::TempDir dir_{"dspark-eq"};
  model::TinySpec spec_;
  std::unique_ptr<model::KimiModel> target_;
  int64_t last_length_ = 0;
};

TEST_P(DSparkDraftEquality, GreedyTokensEqualDraftingOffAndTheCacheEqualsARebuild) {
  int checked = 0;
  int64_t proposed = 0, accepted = 0, oracle_accepted = 0;
  for (int salt = 0; salt < 4; ++salt) {
    auto prompt = prompt_of(3 + 5 * salt, salt, int(spec_.vocab));
    for (int n : {1, 6, 19}) {
      auto ref = run(prompt, n, nullptr, -1).generated;
      ASSERT_EQ(ref.size(), size_t(n));
      for (int depth : {-1, 1, 3, 7, 103, 107}) {
        // Depths above 100: the oracle proposes (depth - 100) tokens of the known continuation.
        std::unique_ptr<runtime::DSparkDrafter> ds;
        if (depth > 100)
          ds = std::make_unique<OracleDSpark>(model::DSparkModel::load(dir_ / "ds", *target_), ref, prompt.size());
        else
          ds = runtime::DSparkDrafter::load(dir_ / "ds", *target_);
        auto r = run(prompt, n, ds.get(), depth > 100 ? depth - 100 : depth);
        EXPECT_EQ(r.generated, ref) << "depth " << depth << " prompt " << salt << " n " << n;
        if (depth > 100) {
          oracle_accepted += r.accepted;
        } else {
          proposed += r.proposed;
          accepted += r.accepted;
        }
        ++checked;
        // The drafter saw exactly the committed positions: prompt + generated but the pending token.
        const int64_t committed = int64_t(prompt.size() + r.generated.size()) - 1;
        ASSERT_EQ(last_length_, committed);
        ds->catch_up({});  // rows arrive every step and reach the cache when a proposal needs them
        ASSERT_EQ(ds->model().context_length(), committed);
        ASSERT_TRUE(ds->in_step());
        // ... and its cache is bit for bit the one built from those rows in one target pass.
        std::vector<int32_t> tokens = prompt;
        tokens.insert(tokens.end(), r.generated.begin(), r.generated.end() - 1);
        auto fresh = model::DSparkModel::load(dir_ / "ds", *target_);
        auto rows = target_rows(*target_, fresh->config(), tokens);
        fresh->append_context(rows.data(), committed);
        expect_same_cache(ds->model(), *fresh, committed, "after generate");
      }
    }
  }
  EXPECT_EQ(checked, 4 * 3 * 6);
  EXPECT_GT(proposed, 0);
  EXPECT_GT(oracle_accepted, 100);
  std::printf("[dspark] random drafter on %s: %lld proposed, %lld accepted (oracle: %lld accepted)\n",
              GetParam() == 0 ? "kimi_k3" : "kimi_linear", (long long)proposed, (long long)accepted,
              (long long)oracle_accepted);
}

INSTANTIATE_TEST_SUITE_P(Arch, DSparkDraftEquality, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "kimi_k3" : "kimi_linear"; });

TEST(DSparkDrafter, GapStopsProposalsUntilTheTargetStartsOver) {
  auto target = model::KimiModel::load(fixture_dir("k3_tiny_a"));
  runtime::DSparkDrafter d(model::DSparkModel::load(fixture_dir("dspark_tiny"), *target));
  std::vector<int32_t> ids = prompt_of(12, 1, 512);
  auto rows = target_rows(*target, d.model().config(), ids);
  const int64_t W = d.model().config().context_width();
  d.on_committed_rows(rows.data(), 8, 0);
  EXPECT_EQ(d.propose(ids, 3).size(), 3u);
  d.on_committed_rows(rows.data() + 10 * W, 2, 10);  // positions 8 and 9 never arrived
  EXPECT_FALSE(d.in_step());
  EXPECT_TRUE(d.propose(ids, 3).empty());
  d.on_committed_rows(rows.data(), 12, 0);  // the target started over
  EXPECT_TRUE(d.in_step());
  EXPECT_EQ(d.context_length(), 12);
  EXPECT_EQ(d.propose(ids, 5).size(), 5u);
  d.on_committed_rows(rows.data() + 6 * W, 2, 6);  // rolled back to position 6
  EXPECT_EQ(d.context_length(), 8);
}

TEST(DSparkDrafter, ConfidenceCutKeepsAPrefixOfConfidentDrafts) {
  auto target = model::KimiModel::load(fixture_dir("k3_tiny_a"));
  auto ds = model::DSparkModel::load(fixture_dir("dspark_tiny"), *target);
  std::vector<int32_t> ids = prompt_of(9, 2, 512);
  auto rows = target_rows(*target, ds->config(), std::span<const int32_t>(ids.data(), ids.size() - 1));
  ds->append_context(rows.data(), int64_t(ids.size()) - 1);
  auto all = ds->propose(ids.back(), 7);
  ASSERT_EQ(all.tokens.size(), 7u);
  std::vector<float> sig;
  for (float c : all.confidence) sig.push_back(1.0f / (1.0f + std::exp(-c)));
  // A threshold between the smallest and largest σ(confidence) must cut somewhere inside.
  const double threshold = (*std::min_element(sig.begin(), sig.end()) + *std::max_element(sig.begin(), sig.end())) / 2;
  auto cut = ds->propose(ids.back(), 7, threshold);
  ASSERT_LT(cut.tokens.size(), all.tokens.size());
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), all.tokens.begin()));
  for (size_t j = 0; j < cut.tokens.size(); ++j) EXPECT_GE(sig[j], threshold);
  if (cut.tokens.size() < all.tokens.size()) {
    EXPECT_LT(sig[cut.tokens.size()], threshold);
  }
  EXPECT_EQ(ds->propose(ids.back(), 3).tokens, std::vector<int32_t>(all.tokens.begin(), all.tokens.begin() + 3));
}

TEST(DSparkStreamed, StreamedVerifyPassesGiveTheResidentTokens) {
  testing::TempDir dir("dspark-stream");
  auto prompt = prompt_of(10, 4, int(testing::streamed_tiny_spec().vocab));
  auto t = testing::streamed_tiny(dir, prompt, 16,
                                  [&](const model::KimiModel& m) { model::write_tiny_dspark({}, m.config(), dir / "ds"); });
  const auto& ref = t.ref;
  auto& e = t.engine;
  ASSERT_TRUE(e->streaming());
  for (int depth : {-1, 4}) {
    auto ds = runtime::DSparkDrafter::load(dir / "ds", e->model());
    auto st = e->model().new_state();
    auto r = runtime::generate(e->model(), *st, prompt,
                               {.max_new = 16, .stop_at_eos = false, .drafter = ds.get(), .fixed_depth = depth});
    EXPECT_EQ(r.generated, ref) << "depth " << depth;
    EXPECT_EQ(ds->context_length(), st->length());
  }
}

}  // namespace
}  // namespace sluice
