// config.json parsing and validation for the K3-native DSpark drafter, plus the RoPE/YaRN
// constants its attention derives from the config (DeepSeek-V3's YaRN formulas).
#include "model/arch/dspark_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::model {

using namespace format;  // the JSON field readers and the shared config pieces
namespace {

using nlohmann::json;

double positive_number(const json& obj, std::string_view field, const std::string& where) {
  double v = get_number(obj, field, where);
  if (!(v > 0)) fail(where, ": field '", std::string(field), "' must be positive, got ", v);
  return v;
}

double positive_number_or(const json& obj, std::string_view field, double dflt, const std::string& where) {
  double v = get_number_or(obj, field, dflt, where);
  if (!(v > 0)) fail(where, ": field '", std::string(field), "' must be positive, got ", v);
  return v;
}

void parse_rope_scaling(const json& rs, const std::string& where, DSparkConfig& c) {
  std::string type = has_field(rs, "type") ? get_string(rs, "type", where) : get_string_or(rs, "rope_type", "", where);
  if (type != "yarn")
    fail(where, ": type '", type, "' is not supported; the DSpark drafter implements YaRN RoPE only (type \"yarn\")");
  c.rope_factor = positive_number(rs, "factor", where);
  c.rope_original_max_position = get_positive_int(rs, "original_max_position_embeddings", where);
  c.rope_beta_fast = positive_number_or(rs, "beta_fast", 32.0, where);
  c.rope_beta_slow = positive_number_or(rs, "beta_slow", 1.0, where);
  if (!(c.rope_beta_fast > c.rope_beta_slow))
    fail(where, ": beta_fast (", c.rope_beta_fast, ") must exceed beta_slow (", c.rope_beta_slow, ")");
  // DeepSeek-V3's defaults: mscale 1, mscale_all_dim 0 (no change to the softmax scale).
  c.rope_mscale = get_number_or(rs, "mscale", 1.0, where);
  c.rope_mscale_all_dim = get_number_or(rs, "mscale_all_dim", 0.0, where);
  if (c.rope_mscale < 0 || c.rope_mscale_all_dim < 0)
    fail(where, ": mscale and mscale_all_dim must not be negative");
}

}  // namespace

double yarn_mscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

double dspark_softmax_scale(const DSparkConfig& c) {
  double scale = 1.0 / std::sqrt(double(c.qk_head_dim()));
  if (c.rope_mscale_all_dim > 0) {
    double m = yarn_mscale(c.rope_factor, c.rope_mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

double dspark_rope_magnitude(const DSparkConfig& c) {
  return yarn_mscale(c.rope_factor, c.rope_mscale) / yarn_mscale(c.rope_factor, c.rope_mscale_all_dim);
}

std::vector<double> dspark_inv_freq(const DSparkConfig& c) {
  const int64_t d = c.qk_rope_head_dim, half = d / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  const double pi = std::acos(-1.0);
  // Dimension at which a frequency completes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return double(d) * std::log(double(c.rope_original_max_position) / (rotations * 2.0 * pi)) /
           (2.0 * std::log(c.rope_theta));
  };
  double low = 0, high = 0;
  const bool yarn = c.rope_factor > 1.0 && c.rope_original_max_position > 0;
  if (yarn) {
    low = std::max(std::floor(correction_dim(c.rope_beta_fast)), 0.0);
    high = std::min(std::ceil(correction_dim(c.rope_beta_slow)), double(d - 1));
    if (low == high) high += 0.001;
  }
  for (int64_t i = 0; i < half; ++i) {
    const double extrapolated = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(d));
    if (!yarn) {
      inv[size_t(i)] = extrapolated;
      continue;
    }
    const double interpolated = extrapolated / c.rope_factor;
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    // ramp 0: high-frequency pairs keep their frequency; ramp 1: low-frequency pairs are interpolated.
    inv[size_t(i)] = interpolated * ramp + extrapolated * (1.0 - ramp);
  }
  return inv;
}

DSparkConfig parse_dspark_config(const std::string& json_text, const std::string& where) {
  json j = parse_json_text(json_text, where);
  if (!j.is_object()) fail(where, ": expected a JSON object");
  std::vector<std::string> arch = get_string_list(j, "architectures", where);
  if (std::find(arch.begin(), arch.end(), "K3DSparkModel") == arch.end())
    fail(where, ": architectures does not name K3DSparkModel; this is not a K3 DSpark drafter checkpoint");
  DSparkConfig c;
  c.hidden_size = get_positive_int(j, "hidden_size", where);
  c.num_layers = get_positive_int(j, "num_hidden_layers", where);
  c.num_heads = get_positive_int(j, "num_attention_heads", where);
  c.q_lora_rank = get_positive_int(j, "q_lora_rank", where);
  c.kv_lora_rank = get_positive_int(j, "kv_lora_rank", where);
  c.qk_nope_head_dim = get_positive_int(j, "qk_nope_head_dim", where);
  c.qk_rope_head_dim = get_positive_int(j, "qk_rope_head_dim", where);
  if (c.qk_rope_head_dim % 2 != 0)
    fail(where, ": qk_rope_head_dim must be even (RoPE rotates pairs), got ", c.qk_rope_head_dim);
  c.v_head_dim = get_positive_int(j, "v_head_dim", where);
  c.intermediate_size = get_positive_int(j, "intermediate_size", where);
  c.vocab_size = get_positive_int(j, "vocab_size", where);
  c.markov_rank = get_positive_int(j, "markov_rank", where);
  const int64_t mask = get_int(j, "mask_token_id", where);
  if (mask < 0 || mask >= c.vocab_size)
    fail(where, ": mask_token_id ", mask, " is outside the vocabulary (0..", c.vocab_size - 1, ")");
  c.mask_token_id = int32_t(mask);
  c.num_draft_tokens = get_positive_int(j, "num_draft_tokens", where);
  if (c.num_draft_tokens > 16)
    fail(where, ": num_draft_tokens ", c.num_draft_tokens, " is more than the 16 query rows the drafter supports");
  c.target_layer_ids = get_int_list(j, "target_layer_ids", where);
  if (c.target_layer_ids.empty()) fail(where, ": target_layer_ids is empty");
  for (size_t i = 0; i < c.target_layer_ids.size(); ++i) {
    if (c.target_layer_ids[i] < 0)
      fail(where, ": target_layer_ids[", i, "] = ", c.target_layer_ids[i], " is negative (zero-based target layers)");
    if (i > 0 && c.target_layer_ids[i] <= c.target_layer_ids[i - 1])
      fail(where, ": target_layer_ids must be strictly increasing, but entry ", i, " (", c.target_layer_ids[i],
           ") follows ", c.target_layer_ids[i - 1]);
  }
  if (get_string_or(j, "hidden_act", "silu", where) != "silu")
    fail(where, ": hidden_act '", get_string(j, "hidden_act", where), "' is not supported; the drafter's MLP is SiLU-gated");
  if (get_string_or(j, "markov_head_type", "vanilla", where) != "vanilla")
    fail(where, ": markov_head_type '", get_string(j, "markov_head_type", where),
         "' is not supported; the drafter implements the vanilla markov head (markov_w2 · markov_w1[prev])");
  c.rms_norm_eps = float(positive_number_or(j, "rms_norm_eps", 1e-5, where));
  c.rope_theta = positive_number(j, "rope_theta", where);
  if (has_field(j, "rope_scaling")) parse_rope_scaling(get_object(j, "rope_scaling", where), field_where(where, "rope_scaling"), c);
  return c;
}

DSparkConfig load_dspark_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  return parse_dspark_config(read_json_file(path).dump(), path);
}

}  // namespace sluice::model
