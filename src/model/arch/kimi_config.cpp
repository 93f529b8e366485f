// config.json parsing for kimi_k3 (root + text_config, spec §1) and kimi_linear (transformers'
// layer_types/mlp_layer_types form and Moonshot's linear_attn_config/first_k_dense_replace form).
#include "model/arch/kimi_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::model {

using namespace format;  // the JSON field readers and the shared config pieces
namespace {

using nlohmann::json;

int64_t non_negative_or(const json& obj, std::string_view field, int64_t dflt, const std::string& where) {
  int64_t v = get_int_or(obj, field, dflt, where);
  if (v < 0) fail(where, ": field '", std::string(field), "' must not be negative, got ", v);
  return v;
}

float number_or(const json& obj, std::string_view field, double dflt, const std::string& where) {
  return float(get_number_or(obj, field, dflt, where));
}

// Reads 1-based layer lists into per-layer kinds; every layer must be named exactly once.
std::vector<AttnKind> layers_from_lists(const json& lac, int64_t n, const std::string& where) {
  std::vector<int> seen(size_t(n), -1);
  auto mark = [&](std::string_view field, AttnKind kind) {
    for (int64_t one_based : get_int_list(lac, field, where + " linear_attn_config")) {
      if (one_based < 1 || one_based > n)
        fail(where, ": linear_attn_config.", std::string(field), " names layer ", one_based,
             " (1-based) outside 1..", n);
      if (seen[size_t(one_based - 1)] != -1)
        fail(where, ": layer ", one_based, " (1-based) is listed twice in linear_attn_config");
      seen[size_t(one_based - 1)] = int(kind);
    }
  };
  mark("kda_layers", AttnKind::KDA);
  mark("full_attn_layers", AttnKind::MLA);
  std::vector<AttnKind> out;
  for (int64_t i = 0; i < n; ++i) {
    if (seen[size_t(i)] < 0)
      fail(where, ": layer ", i + 1, " (1-based) is in neither kda_layers nor full_attn_layers");
    out.push_back(AttnKind(seen[size_t(i)]));
  }
  return out;
}

void parse_common(const json& tc, const std::string& where, KimiConfig& c) {
  c.vocab_size = get_positive_int(tc, "vocab_size", where);
  c.hidden_size = get_positive_int(tc, "hidden_size", where);
  c.num_layers = get_positive_int(tc, "num_hidden_layers", where);
  c.rms_norm_eps = number_or(tc, "rms_norm_eps", 1e-6, where);
  if (!(c.rms_norm_eps > 0)) fail(where, ": rms_norm_eps must be positive");
  std::string act = tc.contains("hidden_act") ? get_string(tc, "hidden_act", where) : "silu";
  if (act == "silu") {
    c.activation = Activation::SiLU;
  } else if (act == "situ") {
    c.activation = Activation::SiTU;
    c.situ_beta_gate = number_or(tc, "activation_situ_beta", 4.0, where);
    c.situ_beta_up = number_or(tc, "activation_situ_linear_beta", 25.0, where);
    if (!(c.situ_beta_gate > 0) || !(c.situ_beta_up > 0)) fail(where, ": SiTU betas must be positive");
  } else {
    fail(where, ": hidden_act '", act, "' is not supported (expected silu or situ)");
  }
  c.intermediate_size = non_negative_or(tc, "intermediate_size", 0, where);

  c.num_experts = non_negative_or(tc, "num_experts", 0, where);
  c.experts_per_token = non_negative_or(tc, "num_experts_per_token", 0, where);
  c.num_shared_experts = non_negative_or(tc, "num_shared_experts", 0, where);
  c.moe_intermediate_size = non_negative_or(tc, "moe_intermediate_size", 0, where);
  c.renormalize = get_bool_or(tc, "moe_renormalize", true, where);
  c.routed_scaling_factor = number_or(tc, "routed_scaling_factor", 1.0, where);
  c.num_expert_group = non_negative_or(tc, "num_expert_group", 1, where);
  c.topk_group = non_negative_or(tc, "topk_group", 1, where);

  c.num_heads = get_positive_int(tc, "num_attention_heads", where);
  int64_t kv_heads = non_negative_or(tc, "num_key_value_heads", c.num_heads, where);
  if (kv_heads != c.num_heads)
    fail(where, ": num_key_value_heads (", kv_heads, ") must equal num_attention_heads (", c.num_heads, ") for MLA");
  c.q_lora_rank = non_negative_or(tc, "q_lora_rank", 0, where);
  c.kv_lora_rank = get_positive_int(tc, "kv_lora_rank", where);
  c.qk_nope_head_dim = get_positive_int(tc, "qk_nope_head_dim", where);
  c.qk_rope_head_dim = non_negative_or(tc, "qk_rope_head_dim", 0, where);
  c.v_head_dim = get_positive_int(tc, "v_head_dim", where);

  if (tc.contains("bos_token_id") && tc["bos_token_id"].is_number_integer()) c.bos_token_id = tc["bos_token_id"].get<int32_t>();
  if (tc.contains("eos_token_id") && tc["eos_token_id"].is_number_integer()) c.eos_token_id = tc["eos_token_id"].get<int32_t>();
  if (tc.contains("pad_token_id") && tc["pad_token_id"].is_number_integer()) c.pad_token_id = tc["pad_token_id"].get<int32_t>();
}

void parse_k3_text(const json& tc, const std::string& where, KimiConfig& c) {
  parse_common(tc, where, c);
  const json& lac = tc.contains("linear_attn_config") ? tc["linear_attn_config"] : json();
  if (!lac.is_object()) fail(where, ": missing object 'linear_attn_config'");
  std::string lw = where + " linear_attn_config";
  c.kda_heads = get_positive_int(lac, "num_heads", lw);
  c.kda_head_dim = get_positive_int(lac, "head_dim", lw);
  c.conv_kernel = get_positive_int(lac, "short_conv_kernel_size", lw);
  c.kda_full_rank_gate = get_bool_or(lac, "use_full_rank_gate", false, lw);
  if (lac.contains("gate_lower_bound") && !lac["gate_lower_bound"].is_null())
    c.gate_lower_bound = float(get_number(lac, "gate_lower_bound", lw));
  c.attn = layers_from_lists(lac, c.num_layers, where);

  int64_t first_dense = non_negative_or(tc, "first_k_dense_replace", 0, where);
  int64_t freq = non_negative_or(tc, "moe_layer_freq", 1, where);
  if (freq != 1) fail(where, ": moe_layer_freq ", freq, " is not supported (expected 1)");
  for (int64_t i = 0; i < c.num_layers; ++i) c.mlp.push_back(i < first_dense ? MlpKind::Dense : MlpKind::MoE);

  c.routed_expert_hidden_size = non_negative_or(tc, "routed_expert_hidden_size", 0, where);
  c.latent_moe_norm = get_bool_or(tc, "latent_moe_use_norm", false, where);
  c.mla_output_gate = get_bool_or(tc, "mla_use_output_gate", false, where);
  if (!get_bool_or(tc, "mla_use_nope", true, where))
    fail(where, ": mla_use_nope=false (rotary MLA) is not part of kimi_k3 and is not supported");
  c.mla_norm_eps = c.rms_norm_eps;  // K3 follows its config (spec correction (c))
  c.attn_res_block_size = non_negative_or(tc, "attn_res_block_size", 0, where);
  if (c.attn_res_block_size == 0) fail(where, ": kimi_k3 needs attn_res_block_size > 0");
  if (tc.contains("quantization_config")) {
    const json& q = tc["quantization_config"];
    std::string fmt = q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
    if (fmt != "mxfp4-pack-quantized")
      fail(where, ": quantization_config.format '", fmt, "' is not supported (expected mxfp4-pack-quantized)");
    c.experts_mxfp4 = true;
  }
  std::string router = tc.contains("moe_router_activation_func") ? get_string(tc, "moe_router_activation_func", where)
                                                                  : "sigmoid";
  if (router != "sigmoid") fail(where, ": moe_router_activation_func '", router, "' is not supported (sigmoid)");
}

void parse_kimi_linear(const json& tc, const std::string& where, KimiConfig& c) {
  parse_common(tc, where, c);
  const json lac = tc.contains("linear_attn_config") && tc["linear_attn_config"].is_object() ? tc["linear_attn_config"]
                                                                                               : json::object();
  // transformers 5 writes linear_head_dim/linear_num_heads/linear_conv_kernel_dim; Moonshot's
  // original config nests them in linear_attn_config.
  c.kda_heads = tc.contains("linear_num_heads") ? get_positive_int(tc, "linear_num_heads", where)
                                                : get_positive_int(lac, "num_heads", where + " linear_attn_config");
  c.kda_head_dim = tc.contains("linear_head_dim") ? get_positive_int(tc, "linear_head_dim", where)
                                                  : get_positive_int(lac, "head_dim", where + " linear_attn_config");
  c.conv_kernel = tc.contains("linear_conv_kernel_dim")
                      ? get_positive_int(tc, "linear_conv_kernel_dim", where)
                      : (lac.contains("short_conv_kernel_size")
                             ? get_positive_int(lac, "short_conv_kernel_size", where + " linear_attn_config")
                             : 4);
  if (tc.contains("layer_types") && !tc["layer_types"].is_null()) {
    const json& lt = tc["layer_types"];
    if (!lt.is_array() || int64_t(lt.size()) != c.num_layers)
      fail(where, ": layer_types must be a list of num_hidden_layers (", c.num_layers, ") strings");
    for (const json& t : lt) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "linear_attention") c.attn.push_back(AttnKind::KDA);
      else if (s == "full_attention") c.attn.push_back(AttnKind::MLA);
      else fail(where, ": layer_types entry '", t.dump(), "' is not linear_attention or full_attention");
    }
  } else if (lac.contains("kda_layers") && lac.contains("full_attn_layers")) {
    c.attn = layers_from_lists(lac, c.num_layers, where);
  } else {
    // transformers' default pattern when nothing is given
    for (int64_t i = 0; i < c.num_layers; ++i) c.attn.push_back(i && i % 4 == 0 ? AttnKind::MLA : AttnKind::KDA);
  }
  if (tc.contains("mlp_layer_types") && !tc["mlp_layer_types"].is_null()) {
    const json& mt = tc["mlp_layer_types"];
    if (!mt.is_array() || int64_t(mt.size()) != c.num_layers)
      fail(where, ": mlp_layer_types must be a list of num_hidden_layers (", c.num_layers, ") strings");
    for (const json& t : mt) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "dense") c.mlp.push_back(MlpKind::Dense);
      else if (s == "sparse") c.mlp.push_back(MlpKind::MoE);
      else fail(where, ": mlp_layer_types entry '", t.dump(), "' is not dense or sparse");
    }
  } else {
    int64_t first_dense = non_negative_or(tc, "first_k_dense_replace", 1, where);
    for (int64_t i = 0; i < c.num_layers; ++i) c.mlp.push_back(i < first_dense ? MlpKind::Dense : MlpKind::MoE);
  }
  c.mla_norm_eps = 1e-6f;  // transformers' KimiLinearRMSNorm default for q_a/kv_a layernorms
  c.kda_full_rank_gate = false;
}

void validate(KimiConfig& c, const std::string& where) {
  bool any_moe = false, any_dense = false, any_kda = false;
  for (auto m : c.mlp) (m == MlpKind::MoE ? any_moe : any_dense) = true;
  for (auto a : c.attn) any_kda |= a == AttnKind::KDA;
  if (any_dense && c.intermediate_size <= 0) fail(where, ": intermediate_size must be positive for dense layers");
  if (any_moe) {
    if (c.num_experts <= 0) fail(where, ": num_experts must be positive for MoE layers");
    if (c.experts_per_token <= 0 || c.experts_per_token > c.num_experts)
      fail(where, ": num_experts_per_token (", c.experts_per_token, ") must be in 1..num_experts (", c.num_experts, ")");
    if (c.moe_intermediate_size <= 0) fail(where, ": moe_intermediate_size must be positive");
    if (c.num_expert_group <= 0 || c.num_experts % c.num_expert_group != 0)
      fail(where, ": num_expert_group (", c.num_expert_group, ") must divide num_experts (", c.num_experts, ")");
    if (c.topk_group <= 0 || c.topk_group > c.num_expert_group)
      fail(where, ": topk_group (", c.topk_group, ") must be in 1..num_expert_group");
    if (c.num_expert_group > 1 && c.num_experts / c.num_expert_group < 2)
      fail(where, ": grouped routing needs at least 2 experts per group");
    if (c.experts_per_token > c.topk_group * (c.num_experts / c.num_expert_group))
      fail(where, ": num_experts_per_token exceeds the experts in topk_group groups");
    if (c.experts_mxfp4) {
      if (c.expert_input_size() % 32 || c.moe_intermediate_size % 32)
        fail(where, ": MXFP4 experts need routed_expert_hidden_size and moe_intermediate_size divisible by 32");
    }
    if (!std::isfinite(c.routed_scaling_factor)) fail(where, ": routed_scaling_factor must be finite");
  }
  if (any_kda && c.conv_kernel < 1) fail(where, ": short conv kernel must be at least 1");
  if (c.bos_token_id >= c.vocab_size || c.eos_token_id >= c.vocab_size)
    fail(where, ": bos/eos token ids must be below vocab_size (", c.vocab_size, ")");
}

}  // namespace

int64_t KimiConfig::count_layers(AttnKind k) const {
  int64_t n = 0;
  for (auto a : attn) n += a == k;
  return n;
}

KimiConfig parse_kimi_config(const std::string& json_text, const std::string& where) {
  json root = parse_json_text(json_text, where);
  if (!root.is_object()) fail(where, ": expected a JSON object");
  std::string type = root.contains("model_type") && root["model_type"].is_string() ? root["model_type"].get<std::string>()
                                                                                     : "";
  KimiConfig c;
  if (type == "kimi_k3") {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      fail(where, ": kimi_k3 config has no text_config object");
    c.arch = KimiArch::KimiK3;
    c.tensor_prefix = "language_model.";
    parse_k3_text(root["text_config"], where + " text_config", c);
    for (const char* f : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
      if (root.contains(f) && root["text_config"].contains(f) && root[f] != root["text_config"][f])
        fail(where, ": root ", f, " differs from text_config.", f);
    }
  } else if (type == "kimi_linear") {
    c.arch = KimiArch::KimiLinear;
    parse_kimi_linear(root, where, c);
  } else {
    fail(where, ": model_type '", type, "' is not supported (expected kimi_k3 or kimi_linear)");
  }
  validate(c, where);
  return c;
}

KimiConfig load_kimi_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  return parse_kimi_config(read_json_file(path).dump(), path);
}

}  // namespace sluice::model
