// gpt-oss -> llama.cpp's gpt-oss, as its converter writes it (conversion/gpt_oss.py: TextModel keys,
// sliding_window and expert_feed_forward_length; MXFP4 experts repacked into ggml's blocks, the
// interleaved gate_up rows and biases taken apart into ffn_gate_exps / ffn_up_exps, sinks as
// attn_sinks.weight) and its loader and graph read it (src/models/openai-moe.cpp: GQA with biases
// and sinks, sliding-window layers, the top-k-then-softmax router with a bias, the clamped SwiGLU
// with alpha 1.702 and limit 7). A layer pattern other than its default (even layers sliding) goes
// in attention.sliding_window_pattern, which its loader reads. MXFP4 stays MXFP4 (or F32 with --f32).
#include <memory>

#include "core/error.h"
#include "export/export_arch.h"
#include "export/export_common.h"
#include "export/gguf_tensors.h"
#include "model/arch/gpt_oss_config.h"
#include "format/json_util.h"
#include "model/arch/gpt_oss.h"

namespace sluice::gguf {
namespace {

using model::GptOssConfig;

void check_expressible(const GptOssConfig& c, const std::string& arch) {
  if (c.swiglu_alpha != 1.702f || c.swiglu_limit != 7.0f)
    refuse(arch, cat("a clamped SwiGLU with alpha ", c.swiglu_alpha, " and limit ", c.swiglu_limit,
                     " (its graph uses 1.702 and 7)"));
  if (c.hidden_size % 32 != 0 || c.intermediate_size % 32 != 0)
    refuse(arch, "MXFP4 experts whose widths are not multiples of 32");
  if (c.num_experts > 1024) refuse(arch, cat(c.num_experts, " experts per layer (at most 1024)"));
  if (c.num_layers > 512) refuse(arch, cat(c.num_layers, " layers (at most 512)"));
}

}  // namespace

ExportSummary export_gpt_oss(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  const std::string arch = "gpt-oss", a = arch + ".";
  const GptOssConfig c = model::load_gpt_oss_config(model_dir);
  check_expressible(c, arch);
  const nlohmann::json root = format::read_json_file(model_dir + "/config.json");

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::GptOssWeights>();
  model::gpt_oss_tensors(c, weights.get()).bind(ts);
  const model::GptOssWeights& W = *weights;
  const store::ExpertBank bank = model::gpt_oss_expert_bank(c);

  Writer w;
  general_keys(w, arch, model_dir, opt.widen_to_f32 ? kFileAllF32 : kFileMostlyMxfp4Moe);
  gqa_moe_keys(w, arch,
               {.layers = c.num_layers,
                .context = format::get_int_or(root, "max_position_embeddings", 131072, "config.json"),
                .hidden = c.hidden_size,
                .feed_forward = c.intermediate_size,
                .heads = c.num_heads,
                .kv_heads = c.num_kv_heads,
                .head_dim = c.head_dim,
                .experts = c.num_experts,
                .experts_used = c.experts_per_token,
                .expert_feed_forward = c.intermediate_size,
                .rms_norm_eps = c.rms_norm_eps});
  rope_keys(w, arch, c.rope, YarnScale::Plain, opt);
  w.add_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
  bool default_pattern = true;
  for (int64_t l = 0; l < c.num_layers; ++l) default_pattern &= c.sliding[size_t(l)] == (l % 2 == 0);
  if (!default_pattern) w.add_bool_array(a + "attention.sliding_window_pattern", c.sliding);

  tokenizer_keys_from_config(w, arch, model_dir, c.vocab_size, c.bos_token_id, c.eos_token_ids);

  TensorEmitter x(w, arch, opt.widen_to_f32);
  const int64_t H = c.hidden_size;
  x.matrix("token_embd.weight", W.embed);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const model::GptOssLayerWeights& lw = W.layers[size_t(l)];
    const std::string b = cat("blk.", l, ".");
    x.f32(b + "attn_norm.weight", {H}, lw.input_norm.host);
    const struct {
      const char* name;
      const device::Weight& w;
    } proj[] = {{"attn_q", lw.attn.q}, {"attn_k", lw.attn.k}, {"attn_v", lw.attn.v}, {"attn_output", lw.attn.o}};
    for (const auto& p : proj) {
      x.matrix(b + p.name + ".weight", p.w);
      // q/k/v biases are optional to its loader, attn_output's is not: zeros stand in exactly.
      if (p.w.bias || std::string(p.name) == "attn_output") x.bias(b + p.name + ".bias", p.w);
    }
    x.f32(b + "attn_sinks.weight", {c.num_heads}, lw.attn.sinks.host);
    x.f32(b + "post_attention_norm.weight", {H}, lw.post_norm.host);
    x.matrix_f32(b + "ffn_gate_inp.weight", lw.moe.router);
    x.bias(b + "ffn_gate_inp.bias", lw.moe.router);
    // gate_up rows interleave gate unit i (row 2i) and up unit i (row 2i + 1), biases likewise.
    const std::vector<device::ExpertView> views = layer_experts(bank, ts, int(l));
    x.experts(b + "ffn_gate_exps.weight", views, store::ExpertSlot::Gate, 0, 2);
    x.experts(b + "ffn_up_exps.weight", views, store::ExpertSlot::Gate, 1, 2);
    x.experts(b + "ffn_down_exps.weight", views, store::ExpertSlot::Down);
    x.expert_biases(b + "ffn_gate_exps.bias", views, store::ExpertSlot::Gate, 0, 2);
    x.expert_biases(b + "ffn_up_exps.bias", views, store::ExpertSlot::Gate, 1, 2);
    x.expert_biases(b + "ffn_down_exps.bias", views, store::ExpertSlot::Down);
  }
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  // Its loader requires output.weight: a tied model gets the embedding's bytes under that name.
  x.matrix("output.weight", W.lm_head.empty() ? W.embed : W.lm_head);
  return write_file(w, arch, out, opt);
}

}  // namespace sluice::gguf
