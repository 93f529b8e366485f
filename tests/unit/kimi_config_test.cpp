// config.json parsing: both kimi_linear forms, the K3 root + text_config form, and refusals that
// name the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/kimi_config.h"
#include "model/tiny_checkpoint.h"
#include "model_test_util.h"

namespace sluice {
namespace {

using model::AttnKind;
using model::MlpKind;
using model::parse_kimi_config;
using nlohmann::json;

std::string error_of(const std::string& text) {
  try {
    parse_kimi_config(text, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KimiConfig, K3TinyConfigParses) {
  auto c = parse_kimi_config(model::tiny_config_json(testing::tiny_k3_spec()), "cfg");
  EXPECT_EQ(c.arch, model::KimiArch::KimiK3);
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  ASSERT_EQ(c.attn.size(), 9u);
  // 1-based MLA layers 4, 8, 9 -> zero-based 3, 7, 8 (the last two are both MLA).
  for (int l = 0; l < 9; ++l) EXPECT_EQ(c.attn[size_t(l)], (l == 3 || l == 7 || l == 8) ? AttnKind::MLA : AttnKind::KDA);
  EXPECT_EQ(c.mlp[0], MlpKind::Dense);
  EXPECT_EQ(c.mlp[1], MlpKind::MoE);
  EXPECT_TRUE(c.experts_mxfp4);
  EXPECT_TRUE(c.kda_full_rank_gate);
  ASSERT_TRUE(c.gate_lower_bound.has_value());
  EXPECT_FLOAT_EQ(*c.gate_lower_bound, -5.0f);
  EXPECT_EQ(c.activation, model::Activation::SiTU);
  EXPECT_FLOAT_EQ(c.mla_norm_eps, 1e-5f);
  EXPECT_EQ(c.attn_res_block_size, 3);
}

TEST(KimiConfig, TransformersKimiLinearForm) {
  auto c = parse_kimi_config(model::tiny_config_json(testing::tiny_linear_spec()), "cfg");
  EXPECT_EQ(c.arch, model::KimiArch::KimiLinear);
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_FALSE(c.gate_lower_bound.has_value());
  EXPECT_FLOAT_EQ(c.mla_norm_eps, 1e-6f);
  EXPECT_EQ(c.num_expert_group, 3);
  EXPECT_EQ(c.attn[1], AttnKind::MLA);
}

TEST(KimiConfig, MoonshotKimiLinearForm) {
  json j = {{"model_type", "kimi_linear"}, {"vocab_size", 100}, {"hidden_size", 32}, {"num_hidden_layers", 4},
            {"intermediate_size", 64}, {"num_experts", 8}, {"num_experts_per_token", 2}, {"moe_intermediate_size", 16},
            {"num_attention_heads", 2}, {"kv_lora_rank", 8}, {"qk_nope_head_dim", 8}, {"qk_rope_head_dim", 4},
            {"v_head_dim", 8}, {"first_k_dense_replace", 2},
            {"linear_attn_config", {{"num_heads", 2}, {"head_dim", 8}, {"short_conv_kernel_size", 3},
                                    {"kda_layers", {1, 2, 3}}, {"full_attn_layers", {4}}}}};
  auto c = parse_kimi_config(j.dump(), "cfg");
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_EQ(c.attn[3], AttnKind::MLA);
  EXPECT_EQ(c.mlp[1], MlpKind::Dense);
  EXPECT_EQ(c.mlp[2], MlpKind::MoE);
}

TEST(KimiConfig, RefusalsNameTheField) {
  json k3 = json::parse(model::tiny_config_json(testing::tiny_k3_spec()));
  {
    json j = k3;
    j["model_type"] = "llama";
    EXPECT_NE(error_of(j.dump()).find("model_type 'llama'"), std::string::npos);
  }
  {
    json j = k3;
    j["text_config"].erase("hidden_size");
    EXPECT_NE(error_of(j.dump()).find("hidden_size"), std::string::npos);
  }
  {
    json j = k3;
    j["text_config"]["num_hidden_layers"] = -3;
    EXPECT_NE(error_of(j.dump()).find("num_hidden_layers"), std::string::npos);
  }
  {
    json j = k3;
    j["text_config"]["linear_attn_config"]["kda_layers"] = {1, 2, 3};  // layers 5.. missing
    EXPECT_NE(error_of(j.dump()).find("neither kda_layers nor full_attn_layers"), std::string::npos);
  }
  {
    json j = k3;
    j["text_config"]["num_experts_per_token"] = 999;
    EXPECT_NE(error_of(j.dump()).find("num_experts_per_token"), std::string::npos);
  }
  {
    json j = k3;
    j["text_config"]["rms_norm_eps"] = "tiny";
    EXPECT_NE(error_of(j.dump()).find("rms_norm_eps"), std::string::npos);
  }
  {
    json j = k3;
    j["eos_token_id"] = 5;
    EXPECT_NE(error_of(j.dump()).find("eos_token_id"), std::string::npos);
  }
  EXPECT_NE(error_of("{not json").find("cfg.json"), std::string::npos);
}

}  // namespace
}  // namespace sluice
