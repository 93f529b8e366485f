// `sluice make-tiny`: write a small random checkpoint in the real format (tests, fixtures, demos),
// and optionally a random K3 DSpark drafter matched to it (or to an existing target directory).
#include <cstdio>
#include <sstream>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/progress_line.h"
#include "core/error.h"
#include "core/join.h"
#include "model/arch/kimi_config.h"
#include "model/tiny_checkpoint.h"

namespace sluice::cli {
namespace {


void show_progress(int64_t done, int64_t total) {
  static ProgressLine line("make-tiny");
  line.update(uint64_t(done), uint64_t(total));
}

}  // namespace

Action register_make_tiny(CLI::App& app) {
  // Every architecture's fields in one spec, with the command's defaults (a K3 of 9 layers).
  auto s = std::make_shared<model::TinyMoeSpec>();
  auto out = std::make_shared<std::string>();
  auto mla = std::make_shared<std::string>("4,8,9");
  auto ds = std::make_shared<model::TinyDSparkSpec>();
  auto dspark = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>();
  auto dspark_ids = std::make_shared<std::string>();
  const std::vector<std::string> types = model::tiny_model_types();
  const std::string type_list = join(types, ", ");
  CLI::App* sub = app.add_subcommand("make-tiny", "Write a small random checkpoint in the real on-disk format");
  sub->add_option("--arch", s->arch,
                  "config.json's model_type: " + type_list +
                      " (deepseek_v3 and kimi_k2: BF16, FP8 with --fp8, or INT4 routed experts with --int4)")
      ->check(CLI::IsMember(types))
      ->default_val("kimi_k3");
  sub->add_option("--out", *out, "Output directory of the target checkpoint");
  sub->add_option("--seed", s->seed, "Random seed")->default_val(1);
  sub->add_option("--vocab", s->vocab, "Vocabulary size")->default_val(512);
  sub->add_option("--hidden", s->hidden, "Hidden size")->default_val(64);
  sub->add_option("--layers", s->layers, "Number of layers")->default_val(9);
  sub->add_option("--mla-layers", *mla, "1-based MLA layers, comma-separated (others are KDA)")->default_val("4,8,9");
  sub->add_option("--dense-layers", s->dense_layers, "Leading dense-MLP layers")->default_val(1);
  sub->add_option("--kda-heads", s->kda_heads, "KDA heads")->default_val(4);
  sub->add_option("--kda-head-dim", s->kda_head_dim, "KDA head width")->default_val(16);
  sub->add_option("--heads", s->heads, "MLA heads")->default_val(4);
  sub->add_option("--q-lora", s->q_lora, "MLA q_lora_rank (0: plain q_proj)")->default_val(32);
  sub->add_option("--kv-lora", s->kv_lora, "MLA kv_lora_rank")->default_val(32);
  sub->add_option("--nope", s->nope, "qk_nope_head_dim")->default_val(16);
  sub->add_option("--rope", s->rope, "qk_rope_head_dim (no rotation is applied)")->default_val(8);
  sub->add_option("--v-dim", s->v_dim, "v_head_dim")->default_val(16);
  sub->add_option("--dense-inter", s->dense_inter, "Dense MLP width")->default_val(128);
  sub->add_option("--experts", s->experts, "Routed experts per MoE layer")->default_val(16);
  sub->add_option("--top-k", s->top_k, "Experts per token")->default_val(4);
  sub->add_option("--shared", s->shared, "Shared experts")->default_val(2);
  sub->add_option("--moe-inter", s->moe_inter, "Expert width (multiple of 32 for K3)")->default_val(64);
  sub->add_option("--latent", s->latent, "K3 routed_expert_hidden_size (multiple of 32)")->default_val(32);
  sub->add_option("--expert-groups", s->expert_groups, "num_expert_group")->default_val(1);
  sub->add_option("--topk-groups", s->topk_groups, "topk_group")->default_val(1);
  sub->add_option("--block", s->block, "K3 attn_res_block_size")->default_val(3);
  sub->add_option("--routed-scaling", s->routed_scaling, "routed_scaling_factor")->default_val(1.0);
  sub->add_option("--shards", s->shards, "Number of safetensors shards")->default_val(2);
  sub->add_option("--kv-heads", s->kv_heads, "qwen3_moe/gpt_oss: key-value heads")->default_val(2);
  sub->add_option("--head-dim", s->head_dim, "qwen3_moe/gpt_oss: head width")->default_val(16);
  sub->add_option("--window", s->window, "gpt_oss: sliding_window of the even layers")->default_val(8);
  sub->add_option("--sparse-step", s->sparse_step, "qwen3_moe: decoder_sparse_step")->default_val(1);
  sub->add_option("--rope-theta", s->rope_theta, "qwen3_moe/gpt_oss/deepseek: rope_theta")->default_val(10000.0);
  sub->add_flag("--fp8", s->fp8, "deepseek_v3/kimi_k2: FP8 e4m3 weights with 128x128 block scales, as released");
  sub->add_flag("--int4", s->int4,
                "deepseek_v3/kimi_k2: routed experts in compressed-tensors pack-quantized INT4 (group 32, BF16 scales), "
                "the rest BF16, as Kimi-K2-Thinking is released");
  sub->add_flag("!--no-norm-topk", s->norm_topk, "qwen3_moe/deepseek: norm_topk_prob false");
  sub->add_option("--dspark", *dspark,
                  "Also write a random K3 DSpark drafter (config.json + model.safetensors) for the target into this directory");
  sub->add_option("--target", *target,
                  "With --dspark and without --out: match the drafter to this existing target checkpoint instead");
  sub->add_option("--dspark-seed", ds->seed, "DSpark random seed")->default_val(2);
  sub->add_option("--dspark-layers", ds->layers, "DSpark layers")->default_val(2)->check(CLI::Range(1, 64));
  sub->add_option("--dspark-layer-ids", *dspark_ids,
                  "Zero-based target layers whose output rows form the context, comma-separated "
                  "(default: up to three spread over the target)");
  sub->add_option("--dspark-draft-tokens", ds->draft_tokens, "Query rows per block (num_draft_tokens)")
      ->default_val(7)->check(CLI::Range(1, 16));
  sub->add_option("--dspark-markov-rank", ds->markov_rank, "Markov head rank")->default_val(16)->check(CLI::Range(1, 4096));
  return [s, out, mla, ds, dspark, target, dspark_ids] {
    if (out->empty() == target->empty())
      fail("make-tiny: give --out DIR (write a target) or, with --dspark, --target DIR (an existing target)");
    if (!target->empty() && dspark->empty()) fail("make-tiny: --target only makes sense with --dspark");
    std::string target_dir = *target;
    if (!out->empty()) {
      if (!dspark->empty() && !model::dspark_fits(s->arch)) fail("make-tiny: --dspark drafts for Kimi K3 targets only");
      s->mla_layers = parse_int_list(*mla, "--mla-layers", 1, /*allow_empty=*/true);
      model::write_tiny_moe_checkpoint(*s, *out, show_progress);
      std::fprintf(stderr, "make-tiny: wrote %s checkpoint to %s\n", s->arch.c_str(), out->c_str());
      target_dir = *out;
    }
    if (!dspark->empty()) {
      if (!dspark_ids->empty()) ds->target_layer_ids = parse_int_list(*dspark_ids, "--dspark-layer-ids", 0);
      model::write_tiny_dspark(*ds, model::load_kimi_config(target_dir), *dspark);
      std::fprintf(stderr, "make-tiny: wrote a DSpark drafter for %s to %s\n", target_dir.c_str(), dspark->c_str());
    }
    return 0;
  };
}

}  // namespace sluice::cli
