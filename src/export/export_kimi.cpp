// The Kimi -> GGUF mapping (names, ggml shapes, keys) follows llama.cpp's converters for kimi-k3 and
// kimi-linear (conversion/kimi_k3.py, kimi_linear.py) and the loaders of the binary we test
// against (src/models/kimi-k3.cpp, kimi-linear.cpp): ggml shapes are the PyTorch shapes reversed
// (ne[0] = the contiguous, input dimension). The checkpoint is read through sluice's own tensor
// list and expert bank (every tensor checked for name, dtype and shape) and streamed: matrices go
// from the mapped file to the output unchanged. Derived tensors are made as the converters make
// them: A_log as -exp(A_log), AttnRes norm x proj as one score vector, kv_b split into k_b and v_b.
#include <cmath>
#include <algorithm>
#include <memory>
#include <optional>

#include "core/error.h"
#include "export/export_arch.h"
#include "export/export_common.h"
#include "export/gguf_tensors.h"
#include "export/gguf_writer.h"
#include "format/json_util.h"
#include "model/arch/kimi_config.h"
#include "format/safetensors.h"
#include "model/arch/kimi.h"
#include "tokenizer/tokenizer.h"

namespace sluice::gguf {
namespace {

using model::AttnKind;
using model::KimiArch;
using model::KimiConfig;
using model::MlpKind;
using device::WeightType;

// What llama.cpp's graph for the architecture cannot express: refused by name.
void check_expressible(const KimiConfig& c, const std::string& arch) {
  auto refuse = [&](const std::string& what) { gguf::refuse(arch, what); };
  if (c.kda_heads != c.num_heads)
    refuse(cat("KDA heads (", c.kda_heads, ") differing from attention heads (", c.num_heads,
               "): it reads both from attention.head_count"));
  if (c.num_expert_group > 1 || c.topk_group > 1)
    refuse(cat("grouped expert routing (num_expert_group ", c.num_expert_group, ", topk_group ", c.topk_group, ")"));
  if (c.num_experts > 1024) refuse(cat(c.num_experts, " experts per layer (at most 1024)"));
  if (c.num_layers > 512) refuse(cat(c.num_layers, " layers (at most 512)"));
  if (c.arch == KimiArch::KimiK3) {
    if (c.activation != model::Activation::SiTU) refuse("a SiLU MLP (its K3 graph always uses SiTU)");
    if (!c.kda_full_rank_gate) refuse("a low-rank KDA output gate (g_a_proj/g_b_proj; its K3 graph reads ssm_g only)");
  } else {
    if (c.q_lora_rank > 0) refuse(cat("q_lora_rank ", c.q_lora_rank, " (its kimi-linear graph uses a plain q_proj)"));
    if (c.mla_output_gate) refuse("the MLA output gate (mla_use_output_gate)");
    if (c.kda_full_rank_gate) refuse("a full-rank KDA output gate (use_full_rank_gate)");
    if (c.gate_lower_bound) refuse("the KDA gate_lower_bound");
    if (c.activation != model::Activation::SiLU) refuse("the SiTU activation");
    if (c.attn_res_block_size > 0) refuse("Block AttnRes (attn_res_block_size)");
    if (c.routed_expert_hidden_size > 0) refuse("latent MoE (routed_expert_hidden_size)");
    if (!c.renormalize) refuse("moe_renormalize false (its graph always renormalises)");
  }
  if (c.experts_mxfp4 && (c.expert_input_size() % 32 != 0 || c.moe_intermediate_size % 32 != 0))
    refuse("MXFP4 experts whose widths are not multiples of 32");
}

}  // namespace

ExportSummary export_kimi(const std::string& model_dir, const nlohmann::json& root, const std::string& out,
                          const ExportOptions& opt) {
  const KimiConfig c = model::load_kimi_config(model_dir);
  const bool k3 = c.arch == KimiArch::KimiK3;
  const std::string arch = k3 ? "kimi-k3" : "kimi-linear";
  check_expressible(c, arch);
  const nlohmann::json& tc = k3 && root.contains("text_config") ? root["text_config"] : root;

  auto tok = tokenizer::load_tokenizer(model_dir);
  SLUICE_CHECK(tok, model_dir, ": no tokenizer (tiktoken.model and tokenizer_config.json); GGUF needs the vocabulary");
  SLUICE_CHECK(tok->describe().rfind("tiktoken", 0) == 0, model_dir, ": tokenizer ", tok->describe(),
               " cannot be exported: llama.cpp's ", arch, " uses Kimi's tiktoken vocabulary (pre-tokenizer kimi-k2)");

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::KimiWeights>();
  model::kimi_tensors(c, weights.get()).bind(ts);
  const model::KimiWeights& W = *weights;

  if (!k3 && c.mla_norm_eps != c.rms_norm_eps && opt.note)
    opt.note(cat("note: kimi-linear's kv_a_layernorm eps is ", c.mla_norm_eps, " here; llama.cpp uses rms_norm_eps (",
                 c.rms_norm_eps, ") for it, as its own converter leaves it"));

  Writer w;
  const std::string a = arch + ".";
  general_keys(w, arch, model_dir,
               opt.widen_to_f32                     ? kFileAllF32
               : c.experts_mxfp4                    ? kFileMostlyMxfp4Moe
               : W.embed.type == WeightType::BF16 ? kFileMostlyBF16
                                                    : kFileAllF32);
  w.add_u32(a + "vocab_size", uint32_t(c.vocab_size));
  w.add_u32(a + "block_count", uint32_t(c.num_layers));
  const double ctx = tc.contains("max_position_embeddings") && tc["max_position_embeddings"].is_number()
                         ? tc["max_position_embeddings"].get<double>()
                         : 131072.0;
  w.add_u32(a + "context_length", uint32_t(std::min(ctx, 4294967295.0)));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_heads));
  std::vector<int32_t> kv_heads;
  for (AttnKind k : c.attn) kv_heads.push_back(k == AttnKind::MLA ? 1 : 0);
  w.add_i32_array(a + "attention.head_count_kv", kv_heads);
  if (tc.contains("rope_theta") && tc["rope_theta"].is_number())
    w.add_f32(a + "rope.freq_base", float(tc["rope_theta"].get<double>()));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_u32(a + "expert_count", uint32_t(c.num_experts));
  w.add_u32(a + "expert_used_count", uint32_t(c.experts_per_token));
  w.add_u32(a + "expert_gating_func", kGatingSigmoid);
  w.add_u32(a + "ssm.conv_kernel", uint32_t(c.conv_kernel));
  w.add_u32(a + "kda.head_dim", uint32_t(c.kda_head_dim));
  if (k3 && c.gate_lower_bound) w.add_f32(a + "kda.gate_lower_bound", *c.gate_lower_bound);
  if (k3 && c.q_lora_rank > 0) w.add_u32(a + "attention.q_lora_rank", uint32_t(c.q_lora_rank));
  w.add_u32(a + "attention.kv_lora_rank", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "rope.dimension_count", uint32_t(c.qk_rope_head_dim));
  w.add_u32(a + "attention.key_length", uint32_t(c.kv_lora_rank + c.qk_rope_head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "attention.key_length_mla", uint32_t(c.qk_head_dim()));
  w.add_u32(a + "attention.value_length_mla", uint32_t(c.v_head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  w.add_u32(a + "expert_shared_count", uint32_t(c.num_shared_experts));
  int64_t dense = 0;
  while (dense < c.num_layers && c.mlp[size_t(dense)] == MlpKind::Dense) ++dense;
  for (int64_t l = dense; l < c.num_layers; ++l)
    SLUICE_CHECK(c.mlp[size_t(l)] == MlpKind::MoE, "cannot export to GGUF: llama.cpp's ", arch,
                 " cannot express a dense MLP after the first MoE layer (layer ", l, ")");
  w.add_u32(a + "leading_dense_block_count", uint32_t(dense));
  w.add_f32(a + "expert_weights_scale", c.routed_scaling_factor);
  if (k3) {
    w.add_bool(a + "expert_weights_norm", c.renormalize);
    if (c.routed_expert_hidden_size > 0) w.add_u32(a + "expert_latent_length", uint32_t(c.routed_expert_hidden_size));
    w.add_f32(a + "activation.situ_beta", c.situ_beta_gate);
    w.add_f32(a + "activation.situ_linear_beta", c.situ_beta_up);
    w.add_u32(a + "attn_res.block_size", uint32_t(c.attn_res_block_size));
  }

  // Tokenizer (llama.cpp "gpt2" BPE with Kimi's pre-tokenizer). eos as the converters set it: K3
  // the config's eos_token_id, kimi-linear the tokenizer's [EOS].
  auto config_id = [](int32_t id) { return id >= 0 ? std::optional<int32_t>(id) : std::nullopt; };
  tokenizer_keys(w, arch, model_dir, c.vocab_size, config_id(c.bos_token_id), config_id(c.eos_token_id),
                 k3 ? config_id(c.eos_token_id) : tok->special_id("[EOS]"));

  // Tensors.
  TensorEmitter x(w, arch, opt.widen_to_f32);
  const store::ExpertBank bank = model::kimi_expert_bank(c);
  const int64_t H = c.hidden_size, P = c.kda_dim();
  const bool attn_res = c.attn_res_block_size > 0;
  auto res_score = [](const model::Param& norm, const model::Param& proj) {
    std::vector<float> s(norm.host.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = norm.host[i] * proj.host[i];
    return s;
  };
  x.matrix("token_embd.weight", W.embed);
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  if (attn_res) x.f32("output_res_score.weight", {H}, res_score(W.out_res_norm, W.out_res_proj));
  x.matrix("output.weight", W.lm_head);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const model::KimiLayerWeights& lw = W.layers[size_t(l)];
    const std::string b = cat("blk.", l, ".");
    x.f32(b + "attn_norm.weight", {H}, lw.input_norm.host);
    x.f32(b + "ffn_norm.weight", {H}, lw.post_norm.host);
    if (attn_res) {
      x.f32(b + "attn_res_score.weight", {H}, res_score(lw.attn_res_norm, lw.attn_res_proj));
      x.f32(b + "ffn_res_score.weight", {H}, res_score(lw.mlp_res_norm, lw.mlp_res_proj));
    }
    if (lw.attn_kind == AttnKind::KDA) {
      const model::KdaWeights& k = lw.kda;
      x.f32(b + "ssm_conv1d_q.weight", {c.conv_kernel, 1, P, 1}, k.q_conv.host);
      x.f32(b + "ssm_conv1d_k.weight", {c.conv_kernel, 1, P, 1}, k.k_conv.host);
      x.f32(b + "ssm_conv1d_v.weight", {c.conv_kernel, 1, P, 1}, k.v_conv.host);
      x.matrix(b + "attn_q.weight", k.q);
      x.matrix(b + "attn_k.weight", k.k);
      x.matrix(b + "attn_v.weight", k.v);
      x.matrix(b + "ssm_f_a.weight", k.f_a);
      x.matrix(b + "ssm_f_b.weight", k.f_b);
      x.matrix(b + "ssm_beta.weight", k.b);
      // ssm_a holds -exp(A_log), one per head (K3 pads A_log with zeros to the head width).
      std::vector<float> ssm_a(size_t(c.kda_heads));
      for (size_t i = 0; i < k.a_log.host.size(); ++i) {
        if (i < ssm_a.size()) {
          ssm_a[i] = -std::exp(k.a_log.host[i]);
        } else {
          SLUICE_CHECK(k.a_log.host[i] == 0.0f, ts.dir(), ": layer ", l, " A_log entry ", i, " is ", k.a_log.host[i],
                       "; A_log holds one value per head (", c.kda_heads, ")");
        }
      }
      if (k3) x.f32(b + "ssm_a", {c.kda_heads}, std::move(ssm_a));
      else x.f32(b + "ssm_a", {1, c.kda_heads, 1, 1}, std::move(ssm_a));
      x.f32(b + "ssm_dt.bias", {P}, k.dt_bias.host);
      if (k3) {
        x.matrix(b + "ssm_g.weight", k.g);
      } else {
        x.matrix(b + "ssm_g_a.weight", k.g_a);
        x.matrix(b + "ssm_g_b.weight", k.g_b);
      }
      x.f32(b + "ssm_norm.weight", {c.kda_head_dim}, k.o_norm.host);
      x.matrix(b + "attn_output.weight", k.o);
    } else {
      const model::MlaWeights& m = lw.mla;
      x.mla_projections(b, m, c.q_lora_rank, c.kv_lora_rank, c.num_heads, c.qk_nope_head_dim, c.v_head_dim);
      if (c.mla_output_gate) x.matrix(b + "attn_gate.weight", m.g);
      x.matrix(b + "attn_output.weight", m.o);
    }
    if (lw.mlp_kind == MlpKind::Dense) {
      x.swiglu(b, lw.dense);
    } else {
      const model::MoeWeights& m = lw.moe;
      x.matrix_f32(b + "ffn_gate_inp.weight", m.router);
      x.f32(b + "exp_probs_b.bias", {c.num_experts}, m.correction_bias.host);
      const std::vector<device::ExpertView> views = layer_experts(bank, ts, int(l));
      x.experts(b + "ffn_gate_exps.weight", views, store::ExpertSlot::Gate);
      x.experts(b + "ffn_down_exps.weight", views, store::ExpertSlot::Down);
      x.experts(b + "ffn_up_exps.weight", views, store::ExpertSlot::Up);
      if (c.routed_expert_hidden_size > 0) {
        x.matrix(b + "ffn_routed_down.weight", m.latent_down);
        x.matrix(b + "ffn_routed_up.weight", m.latent_up);
        if (c.latent_moe_norm) x.f32(b + "ffn_routed_norm.weight", {c.routed_expert_hidden_size}, m.latent_norm.host);
      }
      if (m.has_shared) x.swiglu(b, m.shared, "_shexp");
    }
  }
  return write_file(w, arch, out, opt);
}

}  // namespace sluice::gguf
