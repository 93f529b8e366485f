// config.json of a K3-native DSpark block drafter (architectures ["K3DSparkModel"], spec §5.2):
// MLA layers with YaRN RoPE conditioned on target hidden rows, a markov head and a confidence
// head. Parsed and validated at the boundary; the drafter is driven entirely by this.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::model {

struct DSparkConfig {
  int64_t hidden_size = 0, num_layers = 0, num_heads = 0;
  int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0, markov_rank = 0;
  int32_t mask_token_id = -1;
  int64_t num_draft_tokens = 0;            // query rows of one block (pending + masks)
  std::vector<int64_t> target_layer_ids;   // zero-based target layers whose output rows form the context
  float rms_norm_eps = 1e-5f;

  // RoPE on the rope part of q and k, interleaved pairs; YaRN when rope_factor > 1.
  double rope_theta = 10000.0;
  double rope_factor = 1.0;
  int64_t rope_original_max_position = 0;  // 0 when there is no rope_scaling
  double rope_beta_fast = 32.0, rope_beta_slow = 1.0;
  double rope_mscale = 1.0, rope_mscale_all_dim = 0.0;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t context_width() const { return int64_t(target_layer_ids.size()) * hidden_size; }
};

// DeepSeek's YaRN magnitude factor: 0.1·m·ln(f) + 1, and 1 when f <= 1.
double yarn_mscale(double factor, double m);

// Softmax scale of the drafter's attention: (nope + rope)^-0.5 · yarn_mscale(factor, mscale_all_dim)².
double dspark_softmax_scale(const DSparkConfig& c);

// Per rotated pair i (0 <= i < rope/2): the YaRN inverse frequency as DeepSeek-V3 computes it
// (extrapolated θ^(-2i/d) blended with interpolated θ^(-2i/d)/factor by a linear ramp between
// the correction dimensions of beta_fast and beta_slow), and the cos/sin magnitude
// yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim).
std::vector<double> dspark_inv_freq(const DSparkConfig& c);
double dspark_rope_magnitude(const DSparkConfig& c);

// Reads `dir`/config.json; parse_dspark_config takes the text with `where` naming its source.
// Throws sluice::Error naming the field for a wrong architecture, a missing or mistyped field,
// a non-positive size, an odd rope width, a mask token outside the vocabulary, or target layer
// ids that are empty, negative or not strictly increasing.
DSparkConfig load_dspark_config(const std::string& dir);
DSparkConfig parse_dspark_config(const std::string& json_text, const std::string& where);

}  // namespace sluice::model
