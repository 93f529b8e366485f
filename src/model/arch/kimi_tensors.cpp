// The Kimi family's one tensor list, in checkpoint order (make-tiny writes it in this order, one
// random stream through it): embedding; per layer norms, AttnRes, KDA or MLA, dense MLP or MoE
// (router, latent projections, shared experts, then the layer's routed experts from the bank);
// final norms and lm_head.
#include "model/arch/kimi.h"

#include <algorithm>

#include "core/error.h"

namespace sluice::model {
namespace {


std::string layer_prefix(const KimiConfig& c, int64_t l) { return cat(c.tensor_prefix, "model.layers.", l, "."); }

int64_t a_log_entries(const KimiConfig& c) {
  // K3 stores one value per head padded with zeros to the head width (spec §2.4).
  return c.arch == KimiArch::KimiK3 ? std::max(c.kda_heads, c.kda_head_dim) : c.kda_heads;
}

}  // namespace

TensorList kimi_tensors(const KimiConfig& c, KimiWeights* w) {
  // Without weights to bind (make-tiny) the list is built over a local copy and binds nothing.
  KimiWeights scratch;
  KimiWeights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  TensorList t;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const std::string& P = c.tensor_prefix;
  const bool attn_res = c.attn_res_block_size > 0;
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  t.matrix(P + "model.embed_tokens.weight", V, H, bind(&W.embed));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    KimiLayerWeights& lw = W.layers[size_t(l)];
    lw.attn_kind = c.attn[size_t(l)];
    lw.mlp_kind = c.mlp[size_t(l)];
    const std::string L = layer_prefix(c, l);
    t.param(L + "input_layernorm.weight", {H}, bind(&lw.input_norm), Init::NormWeight);
    t.param(L + "post_attention_layernorm.weight", {H}, bind(&lw.post_norm), Init::NormWeight);
    if (attn_res) {
      t.param(L + "self_attention_res_norm.weight", {H}, bind(&lw.attn_res_norm), Init::NormWeight);
      t.param(L + "self_attention_res_proj.weight", {1, H}, bind(&lw.attn_res_proj), Init::ResProj);
      t.param(L + "mlp_res_norm.weight", {H}, bind(&lw.mlp_res_norm), Init::NormWeight);
      t.param(L + "mlp_res_proj.weight", {1, H}, bind(&lw.mlp_res_proj), Init::ResProj);
    }
    const std::string A = L + "self_attn.";
    if (lw.attn_kind == AttnKind::KDA) {
      KdaWeights& k = lw.kda;
      const int64_t Pk = c.kda_dim(), dk = c.kda_head_dim;
      t.matrix(A + "q_proj.weight", Pk, H, bind(&k.q));
      t.matrix(A + "k_proj.weight", Pk, H, bind(&k.k));
      t.matrix(A + "v_proj.weight", Pk, H, bind(&k.v));
      t.param(A + "q_conv1d.weight", {Pk, 1, c.conv_kernel}, bind(&k.q_conv), Init::Conv, DType::F32);
      t.param(A + "k_conv1d.weight", {Pk, 1, c.conv_kernel}, bind(&k.k_conv), Init::Conv, DType::F32);
      t.param(A + "v_conv1d.weight", {Pk, 1, c.conv_kernel}, bind(&k.v_conv), Init::Conv, DType::F32);
      t.matrix(A + "f_a_proj.weight", dk, H, bind(&k.f_a));
      t.matrix(A + "f_b_proj.weight", Pk, dk, bind(&k.f_b));
      t.param(A + "dt_bias", {Pk}, bind(&k.dt_bias), Init::DtBias, DType::F32);
      std::vector<int64_t> a_log_shape =
          c.arch == KimiArch::KimiK3 ? std::vector<int64_t>{a_log_entries(c)} : std::vector<int64_t>{1, 1, c.kda_heads, 1};
      t.param(A + "A_log", a_log_shape, bind(&k.a_log), Init::ALog, DType::F32).init_arg = c.kda_heads;
      t.matrix(A + "b_proj.weight", c.kda_heads, H, bind(&k.b));
      if (c.kda_full_rank_gate) {
        t.matrix(A + "g_proj.weight", Pk, H, bind(&k.g));
      } else {
        t.matrix(A + "g_a_proj.weight", dk, H, bind(&k.g_a));
        t.matrix(A + "g_b_proj.weight", Pk, dk, bind(&k.g_b));
      }
      t.param(A + "o_norm.weight", {dk}, bind(&k.o_norm), Init::NormWeight, DType::F32);
      t.matrix(A + "o_proj.weight", H, Pk, bind(&k.o));
    } else {
      MlaWeights& m = lw.mla;
      const int64_t nh = c.num_heads;
      if (c.q_lora_rank > 0) {
        t.matrix(A + "q_a_proj.weight", c.q_lora_rank, H, bind(&m.q_a));
        t.param(A + "q_a_layernorm.weight", {c.q_lora_rank}, bind(&m.q_a_norm), Init::NormWeight);
        t.matrix(A + "q_b_proj.weight", nh * c.qk_head_dim(), c.q_lora_rank, bind(&m.q_b));
      } else {
        t.matrix(A + "q_proj.weight", nh * c.qk_head_dim(), H, bind(&m.q));
      }
      t.matrix(A + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, H, bind(&m.kv_a));
      t.param(A + "kv_a_layernorm.weight", {c.kv_lora_rank}, bind(&m.kv_a_norm), Init::NormWeight);
      t.matrix(A + "kv_b_proj.weight", nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, bind(&m.kv_b));
      if (c.mla_output_gate) t.matrix(A + "g_proj.weight", nh * c.v_head_dim, H, bind(&m.g));
      t.matrix(A + "o_proj.weight", H, nh * c.v_head_dim, bind(&m.o));
    }
    if (lw.mlp_kind == MlpKind::Dense) {
      // transformers 5 saves the dense MLP under block_sparse_moe. too (it renames every .mlp.).
      const std::string D = L + "mlp.", D5 = L + "block_sparse_moe.";
      t.matrix(D + "gate_proj.weight", c.intermediate_size, H, bind(&lw.dense.gate)).aliases = {D5 + "gate_proj.weight"};
      t.matrix(D + "up_proj.weight", c.intermediate_size, H, bind(&lw.dense.up)).aliases = {D5 + "up_proj.weight"};
      t.matrix(D + "down_proj.weight", H, c.intermediate_size, bind(&lw.dense.down)).aliases = {D5 + "down_proj.weight"};
    } else {
      MoeWeights& m = lw.moe;
      const std::string M = L + "block_sparse_moe.";
      t.matrix(M + "gate.weight", c.num_experts, H, bind(&m.router));
      t.param(M + "gate.e_score_correction_bias", {c.num_experts}, bind(&m.correction_bias), Init::CorrectionBias,
              DType::F32);
      const int64_t R = c.expert_input_size(), I = c.moe_intermediate_size;
      if (c.routed_expert_hidden_size > 0) {
        t.matrix(M + "routed_expert_down_proj.weight", R, H, bind(&m.latent_down));
        t.matrix(M + "routed_expert_up_proj.weight", H, R, bind(&m.latent_up));
        if (c.latent_moe_norm) t.param(M + "routed_expert_norm.weight", {R}, bind(&m.latent_norm), Init::NormWeight);
      }
      if (c.num_shared_experts > 0) {
        const int64_t S = c.num_shared_experts * I;
        m.has_shared = true;
        t.matrix(M + "shared_experts.gate_proj.weight", S, H, bind(&m.shared.gate));
        t.matrix(M + "shared_experts.up_proj.weight", S, H, bind(&m.shared.up));
        t.matrix(M + "shared_experts.down_proj.weight", H, S, bind(&m.shared.down));
      }
      t.experts(int(l));
    }
  }
  t.param(P + "model.norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  if (attn_res) {
    t.param(P + "model.output_attn_res_norm.weight", {H}, bind(&W.out_res_norm), Init::NormWeight);
    t.param(P + "model.output_attn_res_proj.weight", {1, H}, bind(&W.out_res_proj), Init::ResProj);
  }
  t.matrix(P + "lm_head.weight", V, H, bind(&W.lm_head));
  return t;
}

}  // namespace sluice::model
