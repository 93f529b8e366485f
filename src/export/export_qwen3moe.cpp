// Qwen3-MoE -> llama.cpp's qwen3moe, as its converter writes it (conversion/qwen.py's
// Qwen3MoeModel: TextModel keys plus expert_feed_forward_length) and its loader and graph read it
// (src/models/qwen3moe.cpp): GQA with per-head q/k norms and rotate-half RoPE, and on every layer
// the softmax router over all experts, top-k, always renormalised. BF16 stays BF16; FP8 releases
// only with --f32.
#include <memory>

#include "core/error.h"
#include "export/export_arch.h"
#include "export/export_common.h"
#include "export/gguf_tensors.h"
#include "format/json_util.h"
#include "format/qwen3_config.h"
#include "model/arch/qwen3.h"

namespace sluice::gguf {
namespace {

using format::Qwen3Config;

void check_expressible(const Qwen3Config& c, const std::string& arch, const ExportOptions& opt) {
  if (c.quant == format::WeightQuant::Fp8Block && !opt.widen_to_f32)
    fail("cannot export to GGUF as it is: FP8 e4m3 weights (128x128 block scales) have no GGUF type in llama.cpp's ",
         arch, "; export with --f32 (each value x its block scale, in fp32)");
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (!c.sparse[size_t(l)])
      refuse(arch, cat("a dense MLP on layer ", l,
                       " (mlp_only_layers / decoder_sparse_step; its graph routes experts on every layer)"));
  if (!c.norm_topk_prob) refuse(arch, "norm_topk_prob false (its graph always renormalises the top-k weights)");
  if (c.num_experts > 1024) refuse(arch, cat(c.num_experts, " experts per layer (at most 1024)"));
  if (c.num_layers > 512) refuse(arch, cat(c.num_layers, " layers (at most 512)"));
}

}  // namespace

ExportSummary export_qwen3moe(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  const std::string arch = "qwen3moe", a = arch + ".";
  const Qwen3Config c = format::load_qwen3_config(model_dir);
  check_expressible(c, arch, opt);
  const nlohmann::json root = format::read_json_file(model_dir + "/config.json");

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::Qwen3Weights>();
  model::qwen3_tensors(c, weights.get()).bind(ts);
  const model::Qwen3Weights& W = *weights;
  const store::ExpertBank bank = model::qwen3_expert_bank(c);

  Writer w;
  general_keys(w, arch, model_dir,
               opt.widen_to_f32 || W.embed.type != kernels::WeightType::BF16 ? kFileAllF32 : kFileMostlyBF16);
  w.add_u32(a + "block_count", uint32_t(c.num_layers));
  w.add_u32(a + "context_length", uint32_t(format::get_int_or(root, "max_position_embeddings", 4096, "config.json")));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_heads));
  w.add_u32(a + "attention.head_count_kv", uint32_t(c.num_kv_heads));
  rope_keys(w, arch, c.rope, YarnScale::Plain, opt);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_u32(a + "expert_count", uint32_t(c.num_experts));
  w.add_u32(a + "expert_used_count", uint32_t(c.experts_per_token));
  w.add_u32(a + "attention.key_length", uint32_t(c.head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));

  auto config_id = [](int32_t id) { return id >= 0 ? std::optional<int32_t>(id) : std::nullopt; };
  tokenizer_keys(w, arch, model_dir, c.vocab_size, config_id(c.bos_token_id),
                 c.eos_token_ids.empty() ? std::nullopt : std::optional<int32_t>(c.eos_token_ids[0]));

  TensorEmitter x(w, arch, opt.widen_to_f32);
  const int64_t H = c.hidden_size, D = c.head_dim;
  x.matrix("token_embd.weight", W.embed);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const model::Qwen3LayerWeights& lw = W.layers[size_t(l)];
    const std::string b = cat("blk.", l, ".");
    x.f32(b + "attn_norm.weight", {H}, lw.input_norm.host);
    x.matrix(b + "attn_q.weight", lw.attn.q);
    x.matrix(b + "attn_k.weight", lw.attn.k);
    x.matrix(b + "attn_v.weight", lw.attn.v);
    x.matrix(b + "attn_output.weight", lw.attn.o);
    x.f32(b + "attn_q_norm.weight", {D}, lw.attn.q_norm.host);
    x.f32(b + "attn_k_norm.weight", {D}, lw.attn.k_norm.host);
    x.f32(b + "ffn_norm.weight", {H}, lw.post_norm.host);
    x.matrix_f32(b + "ffn_gate_inp.weight", lw.moe.router);
    const std::vector<kernels::ExpertView> views = layer_experts(bank, ts, int(l));
    x.experts(b + "ffn_gate_exps.weight", views, store::ExpertSlot::Gate);
    x.experts(b + "ffn_up_exps.weight", views, store::ExpertSlot::Up);
    x.experts(b + "ffn_down_exps.weight", views, store::ExpertSlot::Down);
  }
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  if (!c.tie_word_embeddings) x.matrix("output.weight", W.lm_head);  // tied: llama.cpp uses token_embd
  return write_file(w, arch, out, opt);
}

}  // namespace sluice::gguf
