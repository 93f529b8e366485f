// config.json parsing for qwen3 as transformers 4.5x and 5 write it (rope_theta at the root, or
// inside rope_parameters in transformers 5).
#include "format/qwen3_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::format {
namespace {

using nlohmann::json;

// RoPE's type as transformers spells it in rope_scaling / rope_parameters ("type" before 4.45).
std::string rope_type_of(const json& r, const std::string& where) {
  if (has_field(r, "rope_type")) return get_string(r, "rope_type", where);
  if (has_field(r, "type")) return get_string(r, "type", where);
  return "default";
}

void parse_rope(const json& root, const std::string& where, Qwen3Config& c) {
  // Only plain RoPE is implemented: a scaled variant (linear, dynamic, yarn, llama3...) changes
  // every angle, so running it as plain RoPE would be silently wrong.
  if (has_field(root, "rope_scaling")) {
    const json& r = get_object(root, "rope_scaling", where);
    std::string type = rope_type_of(r, field_where(where, "rope_scaling"));
    if (type != "default")
      fail(where, ": rope_scaling with rope_type '", type, "' is not supported (only null / plain RoPE)");
  }
  bool have_root_theta = has_field(root, "rope_theta");
  if (have_root_theta) c.rope_theta = get_number(root, "rope_theta", where);
  if (has_field(root, "rope_parameters")) {
    const std::string pw = field_where(where, "rope_parameters");
    const json& r = get_object(root, "rope_parameters", where);
    std::string type = rope_type_of(r, pw);
    if (type != "default")
      fail(where, ": rope_parameters.rope_type '", type, "' is not supported (only plain RoPE, 'default')");
    if (has_field(r, "rope_theta")) {
      double theta = get_number(r, "rope_theta", pw);
      if (have_root_theta && theta != c.rope_theta)
        fail(where, ": rope_theta (", c.rope_theta, ") differs from rope_parameters.rope_theta (", theta, ")");
      c.rope_theta = theta;
    }
  }
  if (!(c.rope_theta > 1.0) || !std::isfinite(c.rope_theta))
    fail(where, ": field 'rope_theta' must be a finite number above 1, got ", c.rope_theta);
}

std::vector<int32_t> token_ids(const json& root, std::string_view field, const std::string& where) {
  std::vector<int32_t> out;
  if (!has_field(root, field)) return out;
  const json& v = root[std::string(field)];
  if (v.is_array()) {
    for (int64_t id : get_int_list(root, field, where)) out.push_back(int32_t(id));
  } else {
    out.push_back(int32_t(get_int(root, field, where)));
  }
  return out;
}

}  // namespace

bool Qwen3Config::is_eos(int32_t id) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), id) != eos_token_ids.end();
}

Qwen3Config parse_qwen3_config(const std::string& json_text, const std::string& where) {
  json root = parse_json_text(json_text, where);
  if (!root.is_object()) fail(where, ": expected a JSON object");
  std::string type = get_string_or(root, "model_type", "", where);
  if (type != "qwen3") fail(where, ": model_type '", type, "' is not qwen3");
  Qwen3Config c;
  c.vocab_size = get_positive_int(root, "vocab_size", where);
  c.hidden_size = get_positive_int(root, "hidden_size", where);
  c.intermediate_size = get_positive_int(root, "intermediate_size", where);
  c.num_layers = get_positive_int(root, "num_hidden_layers", where);
  c.num_heads = get_positive_int(root, "num_attention_heads", where);
  c.num_kv_heads = get_positive_int(root, "num_key_value_heads", where);
  c.head_dim = get_positive_int(root, "head_dim", where);
  if (c.num_heads % c.num_kv_heads != 0)
    fail(where, ": num_attention_heads (", c.num_heads, ") must be a multiple of num_key_value_heads (",
         c.num_kv_heads, ")");
  if (c.head_dim % 2 != 0) fail(where, ": field 'head_dim' must be even for RoPE, got ", c.head_dim);
  c.rms_norm_eps = float(get_number_or(root, "rms_norm_eps", 1e-6, where));
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    fail(where, ": field 'rms_norm_eps' must be positive and finite");
  parse_rope(root, where, c);
  c.tie_word_embeddings = get_bool_or(root, "tie_word_embeddings", false, where);

  std::string act = get_string_or(root, "hidden_act", "silu", where);
  if (act != "silu") fail(where, ": hidden_act '", act, "' is not supported (expected silu)");
  if (get_bool_or(root, "attention_bias", false, where))
    fail(where, ": attention_bias true (q/k/v/o biases) is not supported");
  if (get_bool_or(root, "use_sliding_window", false, where))
    fail(where, ": use_sliding_window true is not supported (every layer must be full attention)");
  if (has_field(root, "layer_types")) {
    std::vector<std::string> types = get_string_list(root, "layer_types", where);
    if (int64_t(types.size()) != c.num_layers)
      fail(where, ": layer_types has ", types.size(), " entries, num_hidden_layers is ", c.num_layers);
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] != "full_attention")
        fail(where, ": layer_types[", i, "] '", types[i], "' is not supported (only full_attention)");
  }

  std::vector<int32_t> bos = token_ids(root, "bos_token_id", where);
  if (bos.size() > 1) fail(where, ": field 'bos_token_id' must be one id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = token_ids(root, "eos_token_id", where);
  for (int32_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) fail(where, ": eos_token_id ", id, " is outside 0..vocab_size-1");
  if (c.bos_token_id >= c.vocab_size) fail(where, ": bos_token_id ", c.bos_token_id, " is not below vocab_size");
  return c;
}

Qwen3Config load_qwen3_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  return parse_qwen3_config(read_json_file(path).dump(), path);
}

}  // namespace sluice::format
