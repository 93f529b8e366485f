// Rope parameters: config parsing (legacy and transformers 5 forms) and transformers' fp32
// frequency arithmetic, step by step in the order modeling_rope_utils.py rounds.
#include "format/rope_params.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::format {
namespace {

using nlohmann::json;

std::string type_of(const json& r, const std::string& where) {
  if (has_field(r, "rope_type")) return get_string(r, "rope_type", where);
  if (has_field(r, "type")) return get_string(r, "type", where);
  return "default";
}

double positive(const json& r, std::string_view field, const std::string& where) {
  const double v = get_number(r, field, where);
  if (!(v > 0) || !std::isfinite(v)) fail(where, ": field '", field, "' must be positive and finite, got ", v);
  return v;
}

}  // namespace

double yarn_get_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

RopeParams parse_rope_params(const json& root, double default_theta, int64_t max_position_embeddings,
                             const std::string& where) {
  RopeParams p;
  p.theta = default_theta;
  const bool has_theta = has_field(root, "rope_theta");
  if (has_theta) p.theta = positive(root, "rope_theta", where);
  auto check_theta = [&](const std::string& w) {
    if (!(p.theta > 1.0)) fail(w, ": rope_theta must be above 1, got ", p.theta);
  };
  check_theta(where);
  // transformers 5 folds rope_scaling into rope_parameters; a config carries one or the other (or
  // both, equal, when written by a converter).
  const json* r = nullptr;
  std::string rw;
  if (has_field(root, "rope_parameters")) {
    r = &get_object(root, "rope_parameters", where);
    rw = field_where(where, "rope_parameters");
  } else if (has_field(root, "rope_scaling")) {
    r = &get_object(root, "rope_scaling", where);
    rw = field_where(where, "rope_scaling");
  }
  if (!r) return p;
  if (has_field(*r, "rope_theta")) {
    const double t = positive(*r, "rope_theta", rw);
    if (has_theta && t != p.theta) fail(where, ": rope_theta (", p.theta, ") differs from ", rw, ".rope_theta (", t, ")");
    p.theta = t;
    check_theta(rw);
  }
  if (has_field(*r, "partial_rotary_factor") && get_number(*r, "partial_rotary_factor", rw) != 1.0)
    fail(rw, ": partial_rotary_factor ", get_number(*r, "partial_rotary_factor", rw),
         " is not supported (RoPE over the whole rotary width only)");
  const std::string type = type_of(*r, rw);
  if (type == "default") return p;
  if (type != "yarn")
    fail(field_where(rw, "rope_type"), " '", type, "' is not supported (sluice implements 'default' and 'yarn')");
  p.yarn = true;
  // A top-level original_max_position_embeddings overrides the dict's (transformers 5's mixin).
  if (has_field(root, "original_max_position_embeddings"))
    p.original_max_position = get_positive_int(root, "original_max_position_embeddings", where);
  else if (has_field(*r, "original_max_position_embeddings"))
    p.original_max_position = get_positive_int(*r, "original_max_position_embeddings", rw);
  else
    p.original_max_position = max_position_embeddings;
  if (p.original_max_position <= 0)
    fail(rw, ": YaRN needs original_max_position_embeddings (or max_position_embeddings)");
  p.factor = has_field(*r, "factor") ? positive(*r, "factor", rw)
                                     : double(max_position_embeddings) / double(p.original_max_position);
  if (!(p.factor >= 1.0)) fail(rw, ": YaRN factor ", p.factor, " must be at least 1");
  // transformers: `rope_parameters.get("beta_fast") or 32` (so 0 also means the default).
  if (has_field(*r, "beta_fast") && get_number(*r, "beta_fast", rw) != 0) p.beta_fast = positive(*r, "beta_fast", rw);
  if (has_field(*r, "beta_slow") && get_number(*r, "beta_slow", rw) != 0) p.beta_slow = positive(*r, "beta_slow", rw);
  if (has_field(*r, "mscale")) p.mscale = get_number(*r, "mscale", rw);
  if (has_field(*r, "mscale_all_dim")) p.mscale_all_dim = get_number(*r, "mscale_all_dim", rw);
  if (p.mscale < 0 || p.mscale_all_dim < 0) fail(rw, ": mscale and mscale_all_dim must not be negative");
  if (has_field(*r, "attention_factor")) p.attention_factor = positive(*r, "attention_factor", rw);
  p.truncate = get_bool_or(*r, "truncate", true, rw);
  return p;
}

std::vector<double> rope_inv_freq(const RopeParams& p, int64_t dim) {
  const int64_t half = dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  const float base = float(p.theta);
  // pos_freqs = base ** (arange(0, dim, 2).float() / dim), all fp32.
  std::vector<float> pos(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) pos[size_t(i)] = std::pow(base, float(2 * i) / float(dim));
  if (!p.yarn) {
    for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = double(1.0f / pos[size_t(i)]);
    return inv;
  }
  // Correction range in double (Python floats), then met by fp32 tensors.
  const double pi = std::acos(-1.0);
  auto correction_dim = [&](double rotations) {
    return double(dim) * std::log(double(p.original_max_position) / (rotations * 2.0 * pi)) / (2.0 * std::log(p.theta));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  const float lowf = float(low), span = float(high - low), factor = float(p.factor);
  for (int64_t i = 0; i < half; ++i) {
    const float extrapolation = 1.0f / pos[size_t(i)];
    const float interpolation = 1.0f / (factor * pos[size_t(i)]);
    const float ramp = std::clamp((float(i) - lowf) / span, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // inv_freq_extrapolation_factor
    const float a = interpolation * (1.0f - keep), b = extrapolation * keep;
    inv[size_t(i)] = double(a + b);
  }
  return inv;
}

double rope_attention_factor(const RopeParams& p) {
  if (!p.yarn) return 1.0;
  if (p.attention_factor > 0) return p.attention_factor;
  if (p.mscale > 0 && p.mscale_all_dim > 0)
    return yarn_get_mscale(p.factor, p.mscale) / yarn_get_mscale(p.factor, p.mscale_all_dim);
  return yarn_get_mscale(p.factor, 1.0);
}

}  // namespace sluice::format
