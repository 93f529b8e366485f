// Qwen3 dense: config.json parsing and refusals that name the field; golden parity against
// transformers' Qwen3ForCausalLM (tests/fixtures/qwen3_*); an independent double-precision
// reference on tiny random checkpoints; batch invariance (a T-row pass equals T one-row passes
// bit for bit) and truncation (equal to never having seen the dropped rows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "model/arch/qwen3_config.h"
#include "format/safetensors.h"
#include "golden_util.h"
#include "model/arch/qwen3.h"
#include "model/tiny_checkpoint.h"
#include "model_test_util.h"

namespace sluice {
namespace {

using model::parse_qwen3_config;
using model::PassOptions;
using nlohmann::json;

json tiny_config() { return json::parse(model::tiny_qwen3_config_json(model::TinyQwen3Spec{})); }

std::string error_of(const json& j) {
  try {
    parse_qwen3_config(j.dump(), "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen3Config, TinyConfigParses) {
  auto c = parse_qwen3_config(tiny_config().dump(), "cfg");
  EXPECT_EQ(c.vocab_size, 384);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.q_dim(), 64);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 382);
  EXPECT_TRUE(c.is_eos(383));
}

TEST(Qwen3Config, Transformers5RopeParametersAndEosLists) {
  json j = tiny_config();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  j["eos_token_id"] = json::array({5, 7});
  j["layer_types"] = json::array({"full_attention", "full_attention", "full_attention"});
  auto c = parse_qwen3_config(j.dump(), "cfg");
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_TRUE(c.is_eos(5));
  EXPECT_TRUE(c.is_eos(7));
  EXPECT_FALSE(c.is_eos(6));
}

TEST(Qwen3Config, RefusalsNameTheField) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::vector<std::string> want;
  };
  std::vector<Case> cases = {
      {"missing vocab", [](json& j) { j.erase("vocab_size"); }, {"cfg.json", "vocab_size", "missing"}},
      {"zero hidden", [](json& j) { j["hidden_size"] = 0; }, {"hidden_size", "positive"}},
      {"real layers", [](json& j) { j["num_hidden_layers"] = 3.5; }, {"num_hidden_layers"}},
      {"missing head_dim", [](json& j) { j.erase("head_dim"); }, {"head_dim", "missing"}},
      {"odd head_dim", [](json& j) { j["head_dim"] = 15; }, {"head_dim", "even"}},
      {"gqa mismatch", [](json& j) { j["num_key_value_heads"] = 3; }, {"num_attention_heads", "num_key_value_heads"}},
      {"other model", [](json& j) { j["model_type"] = "llama"; }, {"model_type", "llama"}},
      {"attention bias", [](json& j) { j["attention_bias"] = true; }, {"attention_bias"}},
      {"rope scaling", [](json& j) { j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}}; },
       {"rope_scaling", "dynamic"}},
      {"rope parameters", [](json& j) { j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}}; },
       {"rope_parameters.rope_type", "linear"}},
      {"rope theta disagreement", [](json& j) { j["rope_parameters"] = {{"rope_theta", 5.0e5}}; },
       {"rope_theta", "rope_parameters.rope_theta"}},
      {"bad theta", [](json& j) { j["rope_theta"] = "big"; }, {"rope_theta"}},
      {"activation", [](json& j) { j["hidden_act"] = "gelu"; }, {"hidden_act", "gelu"}},
      {"sliding window", [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window"}},
      {"sliding layer", [](json& j) { j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"}; },
       {"layer_types[1]", "sliding_attention"}},
      {"eos outside vocab", [](json& j) { j["eos_token_id"] = 384; }, {"eos_token_id", "384"}},
      {"tie type", [](json& j) { j["tie_word_embeddings"] = "yes"; }, {"tie_word_embeddings"}},
  };
  for (const auto& c : cases) {
    json j = tiny_config();
    c.edit(j);
    std::string msg = error_of(j);
    EXPECT_FALSE(msg.empty()) << c.what << ": accepted";
    for (const auto& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.what << ": '" << msg << "' lacks " << w;
  }
}

// A plain double-precision Qwen3 written from the definition (no cache, whole sequence at once):
// an oracle independent of the model's code, kernels and fp32 rounding.
class Reference {
 public:
  explicit Reference(const std::string& dir) : c_(model::load_qwen3_config(dir)), ts_(format::TensorSet::open_dir(dir)) {}

  // Logits [T, V] of every position.
  std::vector<double> logits(const std::vector<int32_t>& ids) const {
    const int64_t T = int64_t(ids.size()), H = c_.hidden_size, D = c_.head_dim, nh = c_.num_heads;
    const int64_t group = nh / c_.num_kv_heads, V = c_.vocab_size;
    std::vector<double> h(size_t(T * H));
    auto E = get("model.embed_tokens.weight");
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < H; ++d) h[size_t(t * H + d)] = E[size_t(ids[size_t(t)] * H + d)];
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const std::string L = cat("model.layers.", l, ".");
      auto x = norm(h, get(L + "input_layernorm.weight"), H);
      auto q = matmul(x, L + "self_attn.q_proj.weight", T);
      auto k = matmul(x, L + "self_attn.k_proj.weight", T);
      auto v = matmul(x, L + "self_attn.v_proj.weight", T);
      q = norm(q, get(L + "self_attn.q_norm.weight"), D);
      k = norm(k, get(L + "self_attn.k_norm.weight"), D);
      rope(q, T, c_.q_dim());
      rope(k, T, c_.kv_dim());
      std::vector<double> attn(size_t(T * c_.q_dim()), 0.0);
      for (int64_t hd = 0; hd < nh; ++hd) {
        const int64_t kh = hd / group;
        for (int64_t t = 0; t < T; ++t) {
          std::vector<double> p(size_t(t + 1));
          double top = -1e300, sum = 0;
          for (int64_t s = 0; s <= t; ++s) {
            double a = 0;
            for (int64_t d = 0; d < D; ++d)
              a += q[size_t(t * c_.q_dim() + hd * D + d)] * k[size_t(s * c_.kv_dim() + kh * D + d)];
            p[size_t(s)] = a / std::sqrt(double(D));
            top = std::max(top, p[size_t(s)]);
          }
          for (auto& e : p) sum += (e = std::exp(e - top));
          for (int64_t s = 0; s <= t; ++s)
            for (int64_t d = 0; d < D; ++d)
              attn[size_t(t * c_.q_dim() + hd * D + d)] += p[size_t(s)] / sum * v[size_t(s * c_.kv_dim() + kh * D + d)];
        }
      }
      auto o = matmul(attn, L + "self_attn.o_proj.weight", T);
      for (size_t i = 0; i < h.size(); ++i) h[i] += o[i];
      x = norm(h, get(L + "post_attention_layernorm.weight"), H);
      auto g = matmul(x, L + "mlp.gate_proj.weight", T);
      auto u = matmul(x, L + "mlp.up_proj.weight", T);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      auto d = matmul(g, L + "mlp.down_proj.weight", T);
      for (size_t i = 0; i < h.size(); ++i) h[i] += d[i];
    }
    auto f = norm(h, get("model.norm.weight"), H);
    auto out = matmul(f, c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", T);
    EXPECT_EQ(out.size(), size_t(T * V));
    return out;
  }

 private:
  std::vector<double> get(const std::string& name) const {
    const auto& t = ts_.get(name);
    std::vector<double> out(size_t(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, t.data + 2 * i, 2);
      out[i] = bf16_to_f32(b);
    }
    return out;
  }
  std::vector<double> matmul(const std::vector<double>& x, const std::string& name, int64_t T) const {
    const auto& t = ts_.get(name);
    const int64_t rows = t.shape[0], cols = t.shape[1];
    auto w = get(name);
    std::vector<double> y(size_t(T * rows), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        double a = 0;
        for (int64_t k = 0; k < cols; ++k) a += w[size_t(r * cols + k)] * x[size_t(i * cols + k)];
        y[size_t(i * rows + r)] = a;
      }
    return y;
  }
  // RMSNorm of every `width`-wide group.
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& w, int64_t width) const {
    std::vector<double> y(x.size());
    for (size_t g = 0; g < x.size(); g += size_t(width)) {
      double ss = 0;
      for (int64_t i = 0; i < width; ++i) ss += x[g + size_t(i)] * x[g + size_t(i)];
      double inv = 1.0 / std::sqrt(ss / double(width) + c_.rms_norm_eps);
      for (int64_t i = 0; i < width; ++i) y[g + size_t(i)] = w[size_t(i)] * x[g + size_t(i)] * inv;
    }
    return y;
  }
  // rotate_half RoPE on every head of a [T, width] array.
  void rope(std::vector<double>& x, int64_t T, int64_t width) const {
    const int64_t D = c_.head_dim, half = D / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h0 = 0; h0 < width; h0 += D)
        for (int64_t i = 0; i < half; ++i) {
          double angle = double(t) / std::pow(c_.rope.theta, double(2 * i) / double(D));
          double& a = x[size_t(t * width + h0 + i)];
          double& b = x[size_t(t * width + h0 + i + half)];
          double na = a * std::cos(angle) - b * std::sin(angle), nb = b * std::cos(angle) + a * std::sin(angle);
          a = na;
          b = nb;
        }
  }

  model::Qwen3Config c_;
  format::TensorSet ts_;
};

std::vector<int32_t> some_ids(int n, int salt, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + salt * 11 + 3) % vocab));
  return ids;
}

class Qwen3Tiny : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    spec_.tied = GetParam();
    spec_.seed = GetParam() ? 7 : 3;
    model::write_tiny_qwen3_checkpoint(spec_, dir_.str());
    model_ = model::Qwen3Model::load(dir_.str());
  }
  model::TinyQwen3Spec spec_;
  testing::TempDir dir_{"qwen3"};
  std::unique_ptr<model::Qwen3Model> model_;
};

TEST_P(Qwen3Tiny, MatchesADoublePrecisionReference) {
  EXPECT_EQ(std::filesystem::exists(dir_ / "model.safetensors"), true);
  Reference ref(dir_.str());
  const int64_t V = spec_.vocab;
  auto ids = some_ids(40, 1, V);
  auto want = ref.logits(ids);
  std::vector<float> got(want.size());
  auto st = model_->new_state();
  model_->forward(*st, ids, PassOptions{.all_logits = true}, got.data());
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    double scale = 0, err = 0;
    for (int64_t v = 0; v < V; ++v) {
      size_t i = t * size_t(V) + size_t(v);
      scale = std::max(scale, std::fabs(want[i]));
      err = std::max(err, std::fabs(got[i] - want[i]));
    }
    worst = std::max(worst, err / scale);
  }
  std::printf("[qwen3] tiny (tied=%d) vs double reference: max relative logit error %.3g\n", int(GetParam()), worst);
  EXPECT_LE(worst, 1e-5);
}

TEST_P(Qwen3Tiny, MultiRowPassEqualsOneRowPassesBitForBit) {
  const int64_t V = spec_.vocab;
  auto ids = some_ids(23, 2, V);
  std::vector<float> all(ids.size() * size_t(V)), one(static_cast<size_t>(V));
  auto batch = model_->new_state();
  model_->forward(*batch, std::span<const int32_t>(ids).first(5), PassOptions{}, one.data());
  // Rows 5.. in one pass on top of a 5-row prefix, against one row at a time.
  model_->forward(*batch, std::span<const int32_t>(ids).subspan(5), PassOptions{.all_logits = true}, all.data());
  auto step = model_->new_state();
  for (size_t t = 0; t < ids.size(); ++t) {
    model_->forward(*step, std::span<const int32_t>(&ids[t], 1), PassOptions{}, one.data());
    if (t < 5) continue;
    ASSERT_EQ(std::memcmp(one.data(), all.data() + (t - 5) * size_t(V), size_t(V) * 4), 0) << "row " << t;
  }
  EXPECT_EQ(step->length(), batch->length());
}

TEST_P(Qwen3Tiny, TruncateEqualsNeverHavingSeenTheRows) {
  const int64_t V = spec_.vocab;
  auto prefix = some_ids(9, 3, V), wrong = some_ids(6, 4, V), next = some_ids(7, 5, V);
  std::vector<float> a(next.size() * size_t(V)), b(next.size() * size_t(V));
  auto st = model_->new_state();
  model_->forward(*st, prefix, PassOptions{}, a.data());
  auto snap = model_->new_snapshot();
  model_->save(*st, *snap);
  model_->forward(*st, wrong, PassOptions{.all_logits = true}, a.data());
  model_->truncate(*st, int64_t(prefix.size()) + 2);  // keep two of the wrong rows ...
  model_->restore(*st, *snap);                          // ... then drop them too
  EXPECT_EQ(st->length(), int64_t(prefix.size()));
  model_->forward(*st, next, PassOptions{.all_logits = true}, a.data());
  auto fresh = model_->new_state();
  std::vector<int32_t> both = prefix;
  both.insert(both.end(), next.begin(), next.end());
  std::vector<float> all(both.size() * size_t(V));
  model_->forward(*fresh, both, PassOptions{.all_logits = true}, all.data());
  EXPECT_EQ(std::memcmp(a.data(), all.data() + prefix.size() * size_t(V), a.size() * 4), 0);
  EXPECT_THROW(model_->truncate(*st, st->length() + 1), Error);
}

INSTANTIATE_TEST_SUITE_P(Tying, Qwen3Tiny, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "tied" : "untied"; });

TEST(Qwen3Load, BadTensorsAreRefusedByName) {
  testing::TempDir dir("qwen3-bad");
  model::TinyQwen3Spec s;
  s.intermediate = 80;
  model::write_tiny_qwen3_checkpoint(s, dir.str());
  // The config now implies another MLP width than the tensors have.
  json j = json::parse(model::tiny_qwen3_config_json(s));
  j["intermediate_size"] = 96;
  write_file_durably(dir / "config.json", j.dump());
  try {
    model::Qwen3Model::load(dir.str());
    FAIL() << "loaded a checkpoint that does not match its config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[80, 64]"), std::string::npos) << e.what();
  }
  // Untied config over a tied checkpoint: lm_head.weight is missing.
  s.intermediate = 96;
  s.tied = true;
  model::write_tiny_qwen3_checkpoint(s, dir.str());
  j = json::parse(model::tiny_qwen3_config_json(s));
  j["tie_word_embeddings"] = false;
  write_file_durably(dir / "config.json", j.dump());
  try {
    model::Qwen3Model::load(dir.str());
    FAIL() << "loaded an untied config without lm_head.weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
  }
}

TEST(Qwen3Load, OutOfVocabularyIdIsRefused) {
  testing::TempDir dir("qwen3-ids");
  model::write_tiny_qwen3_checkpoint(model::TinyQwen3Spec{}, dir.str());
  auto m = model::Qwen3Model::load(dir.str());
  auto st = m->new_state();
  std::vector<float> logits(384);
  std::vector<int32_t> ids{1, 384};
  EXPECT_THROW(m->forward(*st, ids, PassOptions{}, logits.data()), Error);
  EXPECT_EQ(st->length(), 0);
}

// Golden parity against transformers' Qwen3ForCausalLM (tools/fixtures/make_qwen3_fixtures.py on
// the GPU machine).
class Qwen3Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen3Golden, LogitsAndGreedyTokensMatchTransformers) {
  const std::string dir = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + GetParam();
  ASSERT_TRUE(std::filesystem::exists(dir + "/expected.safetensors")) << "missing fixture " << dir;
  auto model = model::Qwen3Model::load(dir);
  int prompts = testing::check_against_reference(*model, dir + "/expected.safetensors", GetParam());
  EXPECT_EQ(prompts, 2);
}

// The trained cross-tokenizer draft of the default target (tools/train/train_qwen3_draft.py),
// against transformers on two held-out snippets.
TEST(Qwen3DefaultDraft, LogitsAndGreedyTokensMatchTransformers) {
  const std::string dir = std::string(SLUICE_SOURCE_DIR) + "/models/default/draft-qwen3";
  auto model = model::Qwen3Model::load(dir);
  EXPECT_EQ(model->config().vocab_size, 2051);
  int prompts = testing::check_against_reference(*model, dir + "/expected.safetensors", "default draft-qwen3");
  EXPECT_EQ(prompts, 2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3Golden, ::testing::Values("qwen3_a", "qwen3_b"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sluice
