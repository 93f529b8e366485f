// Tensor roster of the Kimi family and loading of resident weights against it.
#include "model/kimi_weights.h"

#include <algorithm>

#include "core/error.h"
#include "model/weight_load.h"

namespace sluice::model {
namespace {

using format::AttnKind;
using format::KimiArch;
using format::MlpKind;

std::string layer_prefix(const KimiConfig& c, int64_t l) { return cat(c.tensor_prefix, "model.layers.", l, "."); }

int64_t a_log_entries(const KimiConfig& c) {
  // K3 stores one value per head padded with zeros to the head width (spec §2.4).
  return c.arch == KimiArch::KimiK3 ? std::max(c.kda_heads, c.kda_head_dim) : c.kda_heads;
}

}  // namespace

std::vector<TensorSpec> kimi_roster(const KimiConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  auto add = [&](std::string name, DType dt, std::vector<int64_t> shape, Init init) {
    out.push_back(TensorSpec{std::move(name), dt, std::move(shape), init});
  };
  const std::string& P = c.tensor_prefix;
  const bool attn_res = c.attn_res_block_size > 0;
  add(P + "model.embed_tokens.weight", DType::BF16, {V, H}, Init::Normal);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string L = layer_prefix(c, l);
    add(L + "input_layernorm.weight", DType::BF16, {H}, Init::NormWeight);
    add(L + "post_attention_layernorm.weight", DType::BF16, {H}, Init::NormWeight);
    if (attn_res) {
      add(L + "self_attention_res_norm.weight", DType::BF16, {H}, Init::NormWeight);
      add(L + "self_attention_res_proj.weight", DType::BF16, {1, H}, Init::ResProj);
      add(L + "mlp_res_norm.weight", DType::BF16, {H}, Init::NormWeight);
      add(L + "mlp_res_proj.weight", DType::BF16, {1, H}, Init::ResProj);
    }
    std::string A = L + "self_attn.";
    if (c.attn[size_t(l)] == AttnKind::KDA) {
      const int64_t Pk = c.kda_dim(), dk = c.kda_head_dim;
      for (const char* n : {"q_proj", "k_proj", "v_proj"}) add(A + n + ".weight", DType::BF16, {Pk, H}, Init::Normal);
      for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"})
        add(A + n + ".weight", DType::F32, {Pk, 1, c.conv_kernel}, Init::Conv);
      add(A + "f_a_proj.weight", DType::BF16, {dk, H}, Init::Normal);
      add(A + "f_b_proj.weight", DType::BF16, {Pk, dk}, Init::Normal);
      add(A + "dt_bias", DType::F32, {Pk}, Init::DtBias);
      if (c.arch == KimiArch::KimiK3) add(A + "A_log", DType::F32, {a_log_entries(c)}, Init::ALog);
      else add(A + "A_log", DType::F32, {1, 1, c.kda_heads, 1}, Init::ALog);
      add(A + "b_proj.weight", DType::BF16, {c.kda_heads, H}, Init::Normal);
      if (c.kda_full_rank_gate) {
        add(A + "g_proj.weight", DType::BF16, {Pk, H}, Init::Normal);
      } else {
        add(A + "g_a_proj.weight", DType::BF16, {dk, H}, Init::Normal);
        add(A + "g_b_proj.weight", DType::BF16, {Pk, dk}, Init::Normal);
      }
      add(A + "o_norm.weight", DType::F32, {dk}, Init::NormWeight);
      add(A + "o_proj.weight", DType::BF16, {H, Pk}, Init::Normal);
    } else {
      const int64_t nh = c.num_heads;
      if (c.q_lora_rank > 0) {
        add(A + "q_a_proj.weight", DType::BF16, {c.q_lora_rank, H}, Init::Normal);
        add(A + "q_a_layernorm.weight", DType::BF16, {c.q_lora_rank}, Init::NormWeight);
        add(A + "q_b_proj.weight", DType::BF16, {nh * c.qk_head_dim(), c.q_lora_rank}, Init::Normal);
      } else {
        add(A + "q_proj.weight", DType::BF16, {nh * c.qk_head_dim(), H}, Init::Normal);
      }
      add(A + "kv_a_proj_with_mqa.weight", DType::BF16, {c.kv_lora_rank + c.qk_rope_head_dim, H}, Init::Normal);
      add(A + "kv_a_layernorm.weight", DType::BF16, {c.kv_lora_rank}, Init::NormWeight);
      add(A + "kv_b_proj.weight", DType::BF16, {nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}, Init::Normal);
      if (c.mla_output_gate) add(A + "g_proj.weight", DType::BF16, {nh * c.v_head_dim, H}, Init::Normal);
      add(A + "o_proj.weight", DType::BF16, {H, nh * c.v_head_dim}, Init::Normal);
    }
    if (c.mlp[size_t(l)] == MlpKind::Dense) {
      add(L + "mlp.gate_proj.weight", DType::BF16, {c.intermediate_size, H}, Init::Normal);
      add(L + "mlp.up_proj.weight", DType::BF16, {c.intermediate_size, H}, Init::Normal);
      add(L + "mlp.down_proj.weight", DType::BF16, {H, c.intermediate_size}, Init::Normal);
    } else {
      std::string M = L + "block_sparse_moe.";
      add(M + "gate.weight", DType::BF16, {c.num_experts, H}, Init::Normal);
      add(M + "gate.e_score_correction_bias", DType::F32, {c.num_experts}, Init::CorrectionBias);
      const int64_t R = c.expert_input_size(), I = c.moe_intermediate_size;
      if (c.routed_expert_hidden_size > 0) {
        add(M + "routed_expert_down_proj.weight", DType::BF16, {R, H}, Init::Normal);
        add(M + "routed_expert_up_proj.weight", DType::BF16, {H, R}, Init::Normal);
        if (c.latent_moe_norm) add(M + "routed_expert_norm.weight", DType::BF16, {R}, Init::NormWeight);
      }
      if (c.num_shared_experts > 0) {
        const int64_t S = c.num_shared_experts * I;
        add(M + "shared_experts.gate_proj.weight", DType::BF16, {S, H}, Init::Normal);
        add(M + "shared_experts.up_proj.weight", DType::BF16, {S, H}, Init::Normal);
        add(M + "shared_experts.down_proj.weight", DType::BF16, {H, S}, Init::Normal);
      }
      for (int e = 0; e < c.num_experts; ++e) {
        for (int which : {1, 2, 3}) {
          int64_t rows = which == 2 ? R : I, cols = which == 2 ? I : R;
          if (c.experts_mxfp4) {
            add(format::expert_tensor_name(c, int(l), e, which, "weight_packed"), DType::U8, {rows, cols / 2}, Init::Packed);
            add(format::expert_tensor_name(c, int(l), e, which, "weight_scale"), DType::U8, {rows, cols / 32}, Init::Scale);
          } else {
            add(format::expert_tensor_name(c, int(l), e, which, "weight"), DType::BF16, {rows, cols}, Init::Normal);
          }
        }
      }
    }
  }
  add(P + "model.norm.weight", DType::BF16, {H}, Init::NormWeight);
  if (attn_res) {
    add(P + "model.output_attn_res_norm.weight", DType::BF16, {H}, Init::NormWeight);
    add(P + "model.output_attn_res_proj.weight", DType::BF16, {1, H}, Init::ResProj);
  }
  add(P + "lm_head.weight", DType::BF16, {V, H}, Init::Normal);
  return out;
}

KimiWeights load_kimi_weights(const KimiConfig& c, const format::TensorSet& ts) {
  KimiWeights w;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const std::string& P = c.tensor_prefix;
  const bool attn_res = c.attn_res_block_size > 0;
  w.embed = weight_matrix(ts, P + "model.embed_tokens.weight", V, H);
  if (w.embed.type != kernels::WeightType::BF16 && w.embed.type != kernels::WeightType::F32)
    fail(ts.dir(), ": embedding must be BF16 or F32");
  w.lm_head = weight_matrix(ts, P + "lm_head.weight", V, H);
  w.final_norm = float_vector(ts, P + "model.norm.weight", H);
  if (attn_res) {
    w.out_res_norm = float_vector(ts, P + "model.output_attn_res_norm.weight", H);
    w.out_res_proj = float_vector(ts, P + "model.output_attn_res_proj.weight", H);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.attn_kind = c.attn[size_t(l)];
    lw.mlp_kind = c.mlp[size_t(l)];
    std::string L = layer_prefix(c, l);
    lw.input_norm = float_vector(ts, L + "input_layernorm.weight", H);
    lw.post_norm = float_vector(ts, L + "post_attention_layernorm.weight", H);
    if (attn_res) {
      lw.attn_res_norm = float_vector(ts, L + "self_attention_res_norm.weight", H);
      lw.attn_res_proj = float_vector(ts, L + "self_attention_res_proj.weight", H);
      lw.mlp_res_norm = float_vector(ts, L + "mlp_res_norm.weight", H);
      lw.mlp_res_proj = float_vector(ts, L + "mlp_res_proj.weight", H);
    }
    std::string A = L + "self_attn.";
    if (lw.attn_kind == AttnKind::KDA) {
      KdaWeights& k = lw.kda;
      const int64_t Pk = c.kda_dim(), dk = c.kda_head_dim;
      k.q = weight_matrix(ts, A + "q_proj.weight", Pk, H);
      k.k = weight_matrix(ts, A + "k_proj.weight", Pk, H);
      k.v = weight_matrix(ts, A + "v_proj.weight", Pk, H);
      k.q_conv = float_vector(ts, A + "q_conv1d.weight", Pk * c.conv_kernel);
      k.k_conv = float_vector(ts, A + "k_conv1d.weight", Pk * c.conv_kernel);
      k.v_conv = float_vector(ts, A + "v_conv1d.weight", Pk * c.conv_kernel);
      k.f_a = weight_matrix(ts, A + "f_a_proj.weight", dk, H);
      k.f_b = weight_matrix(ts, A + "f_b_proj.weight", Pk, dk);
      k.dt_bias = float_vector(ts, A + "dt_bias", Pk);
      std::vector<float> a_log = float_vector(ts, A + "A_log", a_log_entries(c));
      for (size_t i = size_t(c.kda_heads); i < a_log.size(); ++i)
        if (a_log[i] != 0.0f)
          fail(ts.dir(), ": tensor ", A, "A_log entry ", i, " is ", a_log[i], "; A_log holds one value per head (",
               c.kda_heads, ") and its padding must be zero");
      a_log.resize(size_t(c.kda_heads));
      k.a_log = std::move(a_log);
      k.b = weight_matrix(ts, A + "b_proj.weight", c.kda_heads, H);
      if (c.kda_full_rank_gate) {
        k.g = weight_matrix(ts, A + "g_proj.weight", Pk, H);
      } else {
        k.g_a = weight_matrix(ts, A + "g_a_proj.weight", dk, H);
        k.g_b = weight_matrix(ts, A + "g_b_proj.weight", Pk, dk);
      }
      k.o_norm = float_vector(ts, A + "o_norm.weight", dk);
      k.o = weight_matrix(ts, A + "o_proj.weight", H, Pk);
    } else {
      MlaWeights& m = lw.mla;
      const int64_t nh = c.num_heads;
      if (c.q_lora_rank > 0) {
        m.q_a = weight_matrix(ts, A + "q_a_proj.weight", c.q_lora_rank, H);
        m.q_a_norm = float_vector(ts, A + "q_a_layernorm.weight", c.q_lora_rank);
        m.q_b = weight_matrix(ts, A + "q_b_proj.weight", nh * c.qk_head_dim(), c.q_lora_rank);
      } else {
        m.q = weight_matrix(ts, A + "q_proj.weight", nh * c.qk_head_dim(), H);
      }
      m.kv_a = weight_matrix(ts, A + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, H);
      m.kv_a_norm = float_vector(ts, A + "kv_a_layernorm.weight", c.kv_lora_rank);
      m.kv_b = weight_matrix(ts, A + "kv_b_proj.weight", nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
      if (m.kv_b.type != kernels::WeightType::BF16 && m.kv_b.type != kernels::WeightType::F32)
        fail(ts.dir(), ": kv_b_proj must be BF16 or F32");
      if (c.mla_output_gate) m.g = weight_matrix(ts, A + "g_proj.weight", nh * c.v_head_dim, H);
      m.o = weight_matrix(ts, A + "o_proj.weight", H, nh * c.v_head_dim);
    }
    if (lw.mlp_kind == MlpKind::Dense) {
      // transformers 5 saves the dense MLP under block_sparse_moe. too (it renames every .mlp.).
      std::string D = ts.find(L + "mlp.gate_proj.weight") ? L + "mlp." : L + "block_sparse_moe.";
      lw.dense.gate = weight_matrix(ts, D + "gate_proj.weight", c.intermediate_size, H);
      lw.dense.up = weight_matrix(ts, D + "up_proj.weight", c.intermediate_size, H);
      lw.dense.down = weight_matrix(ts, D + "down_proj.weight", H, c.intermediate_size);
    } else {
      MoeWeights& m = lw.moe;
      std::string M = L + "block_sparse_moe.";
      m.router = weight_matrix(ts, M + "gate.weight", c.num_experts, H);
      m.correction_bias = float_vector(ts, M + "gate.e_score_correction_bias", c.num_experts);
      const int64_t R = c.expert_input_size(), I = c.moe_intermediate_size;
      if (c.routed_expert_hidden_size > 0) {
        m.latent_down = weight_matrix(ts, M + "routed_expert_down_proj.weight", R, H);
        m.latent_up = weight_matrix(ts, M + "routed_expert_up_proj.weight", H, R);
        if (c.latent_moe_norm) m.latent_norm = float_vector(ts, M + "routed_expert_norm.weight", R);
      }
      if (c.num_shared_experts > 0) {
        const int64_t S = c.num_shared_experts * I;
        m.has_shared = true;
        m.shared.gate = weight_matrix(ts, M + "shared_experts.gate_proj.weight", S, H);
        m.shared.up = weight_matrix(ts, M + "shared_experts.up_proj.weight", S, H);
        m.shared.down = weight_matrix(ts, M + "shared_experts.down_proj.weight", H, S);
      }
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace sluice::model
