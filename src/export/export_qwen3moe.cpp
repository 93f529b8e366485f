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
#include "model/arch/qwen3_config.h"
#include "model/arch/qwen3.h"

namespace sluice::gguf {
namespace {

using model::Qwen3Config;

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
  const Qwen3Config c = model::load_qwen3_config(model_dir);
  check_expressible(c, arch, opt);
  const nlohmann::json root = format::read_json_file(model_dir + "/config.json");

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::Qwen3Weights>();
  model::qwen3_tensors(c, weights.get()).bind(ts);
  const model::Qwen3Weights& W = *weights;
  const store::ExpertBank bank = model::qwen3_expert_bank(c);

  Writer w;
  general_keys(w, arch, model_dir,
               opt.widen_to_f32 || W.embed.type != device::WeightType::BF16 ? kFileAllF32 : kFileMostlyBF16);
  gqa_moe_keys(w, arch,
               {.layers = c.num_layers,
                .context = format::get_int_or(root, "max_position_embeddings", 4096, "config.json"),
                .hidden = c.hidden_size,
                .feed_forward = c.intermediate_size,
                .heads = c.num_heads,
                .kv_heads = c.num_kv_heads,
                .head_dim = c.head_dim,
                .experts = c.num_experts,
                .experts_used = c.experts_per_token,
                .expert_feed_forward = c.moe_intermediate_size,
                .rms_norm_eps = c.rms_norm_eps});
  rope_keys(w, arch, c.rope, YarnScale::Plain, opt);
  tokenizer_keys_from_config(w, arch, model_dir, c.vocab_size, c.bos_token_id, c.eos_token_ids);

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
    const std::vector<device::ExpertView> views = layer_experts(bank, ts, int(l));
    x.experts(b + "ffn_gate_exps.weight", views, store::ExpertSlot::Gate);
    x.experts(b + "ffn_up_exps.weight", views, store::ExpertSlot::Up);
    x.experts(b + "ffn_down_exps.weight", views, store::ExpertSlot::Down);
  }
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  if (!c.tie_word_embeddings) x.matrix("output.weight", W.lm_head);  // tied: llama.cpp uses token_embd
  return write_file(w, arch, out, opt);
}

}  // namespace sluice::gguf
