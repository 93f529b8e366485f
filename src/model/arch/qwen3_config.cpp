// config.json parsing for qwen3 and qwen3_moe as transformers 4.5x and 5 write it (rope_theta at
// the root, or inside rope_parameters in transformers 5).
#include "model/arch/qwen3_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_util.h"
#include "format/token_ids.h"

namespace sluice::model {

using namespace format;  // the JSON field readers and the shared config pieces
namespace {

using nlohmann::json;

// Which layers are sparse, as Qwen3MoeDecoderLayer decides: not in mlp_only_layers, and
// (layer + 1) a multiple of decoder_sparse_step.
void parse_moe(const json& root, const std::string& where, Qwen3Config& c) {
  c.num_experts = get_int_or(root, "num_experts", 0, where);
  if (c.num_experts < 0) fail(where, ": field 'num_experts' must not be negative");
  const int64_t step = get_int_or(root, "decoder_sparse_step", 1, where);
  if (step <= 0) fail(where, ": field 'decoder_sparse_step' must be positive, got ", step);
  std::vector<int64_t> dense_only;
  if (has_field(root, "mlp_only_layers")) dense_only = get_int_list(root, "mlp_only_layers", where);
  for (int64_t l : dense_only)
    if (l < 0 || l >= c.num_layers) fail(where, ": mlp_only_layers names layer ", l, ", outside 0..", c.num_layers - 1);
  for (int64_t l = 0; l < c.num_layers; ++l)
    c.sparse[size_t(l)] = c.num_experts > 0 && (l + 1) % step == 0 &&
                          std::find(dense_only.begin(), dense_only.end(), l) == dense_only.end();
  if (c.num_experts == 0) return;
  c.experts_per_token = get_positive_int(root, "num_experts_per_tok", where);
  if (c.experts_per_token > c.num_experts)
    fail(where, ": num_experts_per_tok (", c.experts_per_token, ") exceeds num_experts (", c.num_experts, ")");
  c.moe_intermediate_size = get_positive_int(root, "moe_intermediate_size", where);
  c.norm_topk_prob = get_bool_or(root, "norm_topk_prob", false, where);
  // Shared experts are Qwen2-MoE's; a config that asks for them is not a Qwen3-MoE this code runs.
  if (get_int_or(root, "shared_expert_intermediate_size", 0, where) > 0)
    fail(where, ": shared_expert_intermediate_size is set; Qwen3-MoE has no shared expert (is this qwen2_moe?)");
}

}  // namespace

bool Qwen3Config::is_eos(int32_t id) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), id) != eos_token_ids.end();
}

// Names transformers 5 writes for fields this parser reads under their 4.x names.
constexpr FieldAlias kQwen3Aliases[] = {{"num_experts", "num_local_experts"}};

Qwen3Config parse_qwen3_config(const std::string& json_text, const std::string& where) {
  json root = parse_json_text(json_text, where);
  if (!root.is_object()) fail(where, ": expected a JSON object");
  apply_field_aliases(root, kQwen3Aliases, where);
  std::string type = get_string_or(root, "model_type", "", where);
  if (type != "qwen3" && type != "qwen3_moe") fail(where, ": model_type '", type, "' is not qwen3 or qwen3_moe");
  Qwen3Config c;
  c.moe = type == "qwen3_moe";
  c.vocab_size = get_positive_int(root, "vocab_size", where);
  c.hidden_size = get_positive_int(root, "hidden_size", where);
  c.intermediate_size = get_positive_int(root, "intermediate_size", where);
  c.num_layers = get_positive_int(root, "num_hidden_layers", where);
  c.num_heads = get_positive_int(root, "num_attention_heads", where);
  c.num_kv_heads = get_positive_int(root, "num_key_value_heads", where);
  // Qwen3MoeConfig has no head_dim field: transformers then uses hidden_size / heads.
  c.head_dim = c.moe && !has_field(root, "head_dim") ? c.hidden_size / c.num_heads : get_positive_int(root, "head_dim", where);
  if (c.head_dim <= 0) fail(where, ": head_dim is not positive");
  if (c.num_heads % c.num_kv_heads != 0)
    fail(where, ": num_attention_heads (", c.num_heads, ") must be a multiple of num_key_value_heads (",
         c.num_kv_heads, ")");
  if (c.head_dim % 2 != 0) fail(where, ": field 'head_dim' must be even for RoPE, got ", c.head_dim);
  c.rms_norm_eps = float(get_number_or(root, "rms_norm_eps", 1e-6, where));
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    fail(where, ": field 'rms_norm_eps' must be positive and finite");
  c.rope = parse_rope_params(root, c.moe ? 1000000.0 : 10000.0,
                             get_int_or(root, "max_position_embeddings", 0, where), where);
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

  c.quant = parse_weight_quant(root, where);
  if (c.quant == WeightQuant::Int4Group32)
    fail(where, ": quantization_config: compressed-tensors INT4 is read only for DeepSeek-V3 / Kimi-K2 routed experts");
  c.sparse.assign(size_t(c.num_layers), false);
  if (c.moe) parse_moe(root, where, c);

  c.bos_token_id = optional_token_id(root, "bos_token_id", c.vocab_size, where);
  c.eos_token_ids = token_id_list(root, "eos_token_id", c.vocab_size, where);
  return c;
}

Qwen3Config load_qwen3_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  return parse_qwen3_config(read_json_file(path).dump(), path);
}

}  // namespace sluice::model
