// Rotary-embedding parameters of a Hugging Face config.json, in both spellings transformers reads
// (the legacy top-level rope_theta + rope_scaling, and transformers 5's rope_parameters), and the
// frequencies and cos/sin magnitude transformers derives from them: plain RoPE and YaRN, with
// transformers' fp32 arithmetic (modeling_rope_utils: _compute_default_rope_parameters and
// _compute_yarn_parameters). Scaling types sluice does not implement are refused by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::format {

struct RopeParams {
  bool yarn = false;  // rope_type "yarn"; else "default"
  double theta = 10000.0;
  // YaRN only.
  double factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 0.0, mscale_all_dim = 0.0;  // 0: absent
  double attention_factor = 0.0;              // 0: derived (rope_attention_factor)
  bool truncate = true;                       // floor/ceil the correction range (gpt-oss: false)
};

// Reads the rope fields of a config root. `default_theta` is the architecture's default when the
// config names none; `max_position_embeddings` fills YaRN's original_max_position_embeddings and
// factor as transformers does when they are absent. Throws naming the field for a scaling type
// other than default/yarn, a partial_rotary_factor other than 1, or values out of range.
RopeParams parse_rope_params(const nlohmann::json& root, double default_theta, int64_t max_position_embeddings,
                             const std::string& where);

// Inverse frequencies of the dim/2 rotated pairs as transformers computes them in fp32 (each value
// is an fp32 number held in a double, ready for device::RopeSpec with f64_angles false).
std::vector<double> rope_inv_freq(const RopeParams& p, int64_t dim);

// The magnitude transformers multiplies cos and sin by (YaRN's attention_factor; 1 for plain RoPE).
double rope_attention_factor(const RopeParams& p);

// DeepSeek's YaRN magnitude: 0.1·m·ln(scale) + 1, and 1 when scale <= 1.
double yarn_get_mscale(double scale, double m);

}  // namespace sluice::format
