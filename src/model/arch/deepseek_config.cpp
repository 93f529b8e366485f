// config.json parsing for deepseek_v3 and kimi_k2 as released (legacy rope_scaling, remote-code
// fields) and as transformers 5 writes them (rope_parameters).
#include "model/arch/deepseek_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_util.h"
#include "format/token_ids.h"

namespace sluice::model {

using namespace format;  // the JSON field readers and the shared config pieces
namespace {

using nlohmann::json;

// Fields of DeepSeek's remote code that transformers ignores and sluice must not silently
// reinterpret: a value other than the one both implementations agree on is refused.
void check_remote_code_fields(const json& root, const std::string& where) {
  if (get_int_or(root, "moe_layer_freq", 1, where) != 1)
    fail(where, ": moe_layer_freq ", get_int_or(root, "moe_layer_freq", 1, where),
         " is not supported (every layer from first_k_dense_replace on is MoE)");
  const std::string method = get_string_or(root, "topk_method", "noaux_tc", where);
  if (method != "noaux_tc")
    fail(where, ": topk_method '", method, "' is not supported (DeepSeek-V3's router is 'noaux_tc')");
  const std::string scoring = get_string_or(root, "scoring_func", "sigmoid", where);
  if (scoring != "sigmoid") fail(where, ": scoring_func '", scoring, "' is not supported (DeepSeek-V3 scores with 'sigmoid')");
}

// Kimi-K2-Thinking's INT4 release quantizes exactly the routed experts: every other Linear module
// (attention, the dense MLP, the shared experts, lm_head) must be in the ignore list and no routed
// expert may be. Asked of the first and last dense and MoE layers and the first and last expert: a
// list that singles out others still cannot load, since the loader checks every tensor's name and
// dtype against the same scheme.
void check_int4_modules(const DeepSeekConfig& c, const std::vector<std::string>& ignore, const std::string& where) {
  const std::string qw = field_where(field_where(where, "quantization_config"), "ignore");
  if (c.hidden_size % 32 != 0 || c.moe_intermediate_size % 32 != 0)
    fail(where, ": INT4 experts need hidden_size (", c.hidden_size, ") and moe_intermediate_size (",
         c.moe_intermediate_size, ") divisible by the group size 32");
  const ModuleMatcher ignored(ignore, qw);
  auto must_be_bf16 = [&](const std::string& m) {
    if (!ignored.matches(m))
      fail(qw, ": module ", m, " is not ignored, so it would be INT4; sluice reads compressed-tensors INT4 only for "
           "the routed experts (as Kimi-K2-Thinking ships them)");
  };
  const char* const mlp[] = {"gate_proj", "up_proj", "down_proj"};
  for (int64_t l : {int64_t(0), c.first_k_dense_replace - 1, c.first_k_dense_replace, c.num_layers - 1}) {
    if (l < 0 || l >= c.num_layers) continue;
    const std::string L = cat("model.layers.", l, "."), A = L + "self_attn.";
    if (c.q_lora_rank > 0) {
      must_be_bf16(A + "q_a_proj");
      must_be_bf16(A + "q_b_proj");
    } else {
      must_be_bf16(A + "q_proj");
    }
    for (const char* m : {"kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}) must_be_bf16(A + m);
    if (!c.is_moe(l)) {
      for (const char* m : mlp) must_be_bf16(L + "mlp." + m);
      continue;
    }
    if (c.num_shared_experts > 0)
      for (const char* m : mlp) must_be_bf16(L + "mlp.shared_experts." + m);
    for (int64_t e : {int64_t(0), c.num_experts - 1})
      for (const char* m : mlp) {
        const std::string name = cat(L, "mlp.experts.", e, ".", m);
        if (ignored.matches(name))
          fail(qw, ": routed expert module ", name, " is ignored (BF16); sluice reads every routed expert of a "
               "compressed-tensors checkpoint as INT4");
      }
  }
  must_be_bf16("lm_head");
}

}  // namespace

double DeepSeekConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(double(qk_head_dim()));
  if (rope.yarn && rope.mscale_all_dim > 0) {
    const double m = yarn_get_mscale(rope.factor, rope.mscale_all_dim);
    scale = scale * m * m;
  }
  return scale;
}

// Names other transformers versions write for fields this parser reads.
constexpr FieldAlias kDeepSeekAliases[] = {{"n_routed_experts", "num_local_experts"}};

DeepSeekConfig parse_deepseek_config(const std::string& json_text, const std::string& where) {
  json root = parse_json_text(json_text, where);
  if (!root.is_object()) fail(where, ": expected a JSON object");
  apply_field_aliases(root, kDeepSeekAliases, where);
  DeepSeekConfig c;
  c.model_type = get_string_or(root, "model_type", "", where);
  if (c.model_type != "deepseek_v3" && c.model_type != "kimi_k2")
    fail(where, ": model_type '", c.model_type, "' is not deepseek_v3 or kimi_k2");
  c.vocab_size = get_positive_int(root, "vocab_size", where);
  c.hidden_size = get_positive_int(root, "hidden_size", where);
  c.intermediate_size = get_positive_int(root, "intermediate_size", where);
  c.num_layers = get_positive_int(root, "num_hidden_layers", where);
  c.num_heads = get_positive_int(root, "num_attention_heads", where);
  if (has_field(root, "num_key_value_heads") && get_int(root, "num_key_value_heads", where) != c.num_heads)
    fail(where, ": num_key_value_heads (", get_int(root, "num_key_value_heads", where),
         ") must equal num_attention_heads for MLA");
  c.q_lora_rank = get_int_or(root, "q_lora_rank", 0, where);
  if (c.q_lora_rank < 0) fail(where, ": field 'q_lora_rank' must be positive or null");
  c.kv_lora_rank = get_positive_int(root, "kv_lora_rank", where);
  c.qk_nope_head_dim = get_positive_int(root, "qk_nope_head_dim", where);
  c.qk_rope_head_dim = get_positive_int(root, "qk_rope_head_dim", where);
  if (c.qk_rope_head_dim % 2 != 0) fail(where, ": qk_rope_head_dim must be even, got ", c.qk_rope_head_dim);
  c.v_head_dim = get_positive_int(root, "v_head_dim", where);
  c.rms_norm_eps = float(get_number_or(root, "rms_norm_eps", 1e-6, where));
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps)) fail(where, ": field 'rms_norm_eps' must be positive");
  const std::string act = get_string_or(root, "hidden_act", "silu", where);
  if (act != "silu") fail(where, ": hidden_act '", act, "' is not supported (expected silu)");
  if (get_bool_or(root, "attention_bias", false, where))
    fail(where, ": attention_bias true (q_a/kv_a/o biases) is not supported");
  c.tie_word_embeddings = get_bool_or(root, "tie_word_embeddings", false, where);
  c.rope_interleave = get_bool_or(root, "rope_interleave", true, where);
  c.rope = parse_rope_params(root, 10000.0, get_int_or(root, "max_position_embeddings", 4096, where), where);

  c.first_k_dense_replace = get_int_or(root, "first_k_dense_replace", 0, where);
  if (c.first_k_dense_replace < 0) fail(where, ": field 'first_k_dense_replace' must not be negative");
  c.num_experts = get_int_or(root, "n_routed_experts", 0, where);
  if (c.num_experts < 0) fail(where, ": field 'n_routed_experts' must not be negative");
  if (c.num_experts > 0) {
    check_remote_code_fields(root, where);
    c.experts_per_token = get_positive_int(root, "num_experts_per_tok", where);
    c.moe_intermediate_size = get_positive_int(root, "moe_intermediate_size", where);
    c.num_shared_experts = get_int_or(root, "n_shared_experts", 0, where);
    if (c.num_shared_experts < 0) fail(where, ": field 'n_shared_experts' must not be negative");
    c.n_group = get_int_or(root, "n_group", 1, where);
    c.topk_group = get_int_or(root, "topk_group", 1, where);
    if (c.n_group <= 0 || c.num_experts % c.n_group != 0)
      fail(where, ": n_group (", c.n_group, ") must divide n_routed_experts (", c.num_experts, ")");
    if (c.topk_group <= 0 || c.topk_group > c.n_group)
      fail(where, ": topk_group (", c.topk_group, ") must be in 1..n_group (", c.n_group, ")");
    if (c.n_group > 1 && c.num_experts / c.n_group < 2)
      fail(where, ": grouped routing scores each group by its two best experts; groups of ", c.num_experts / c.n_group,
           " cannot");
    if (c.experts_per_token > c.topk_group * (c.num_experts / c.n_group))
      fail(where, ": num_experts_per_tok (", c.experts_per_token, ") exceeds the experts of topk_group groups");
    c.norm_topk_prob = get_bool_or(root, "norm_topk_prob", true, where);
    c.routed_scaling_factor = get_number_or(root, "routed_scaling_factor", 1.0, where);
    if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor))
      fail(where, ": field 'routed_scaling_factor' must be positive");
  }
  const QuantConfig quant = parse_quant_config(root, where);
  c.quant = quant.kind;
  if (c.quant == WeightQuant::Int4Group32) check_int4_modules(c, quant.ignore, where);
  c.bos_token_id = optional_token_id(root, "bos_token_id", c.vocab_size, where);
  c.eos_token_ids = token_id_list(root, "eos_token_id", c.vocab_size, where);
  return c;
}

DeepSeekConfig load_deepseek_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return parse_deepseek_config(read_json_file(path).dump(), path);
}

}  // namespace sluice::model
