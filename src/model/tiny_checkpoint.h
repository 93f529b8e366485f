// Writes small random checkpoints in the real on-disk formats (config.json, safetensors shards
// with the real tensor names and dtypes: MXFP4 experts for K3 and gpt-oss, FP8 blocks or INT4
// experts for DeepSeek-V3/Kimi-K2; Qwen3 and Qwen3-MoE as transformers saves them) for tests, fixtures and
// demos.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/arch/kimi_config.h"

namespace sluice::model {

struct TinySpec {
  KimiArch arch = KimiArch::KimiK3;
  uint64_t seed = 1;
  int64_t vocab = 512, hidden = 64, layers = 9;
  std::vector<int64_t> mla_layers = {4, 8, 9};  // 1-based, as in the config lists
  int64_t dense_layers = 1;                     // first_k_dense_replace
  int64_t kda_heads = 4, kda_head_dim = 16, conv_kernel = 4;
  int64_t heads = 4, q_lora = 32, kv_lora = 32, nope = 16, rope = 8, v_dim = 16;
  int64_t dense_inter = 128, experts = 16, top_k = 4, shared = 2, moe_inter = 64, latent = 32;
  int64_t expert_groups = 1, topk_groups = 1;
  int64_t block = 3;  // attn_res_block_size (K3)
  double routed_scaling = 1.0;
  int shards = 2;
};

// The config.json text `spec` implies (the K3 root + text_config form, or transformers' kimi_linear form).
std::string tiny_config_json(const TinySpec& spec);

// Writes config.json, generation_config.json, the safetensors shards and (for more than one
// shard) model.safetensors.index.json into `dir` (created if missing). Every file is written
// atomically. `progress` (optional) is called with (bytes written, total bytes).
void write_tiny_checkpoint(const TinySpec& spec, const std::string& dir,
                           void (*progress)(int64_t done, int64_t total) = nullptr);

// A tiny checkpoint of any registered architecture, in the real on-disk format (what `sluice
// make-tiny` takes): kimi_k3 / kimi_linear (MXFP4 experts; the kimi_* fields below), qwen3_moe
// (BF16 per-expert tensors), qwen3 (dense), gpt_oss (MXFP4 fused per layer, as released),
// deepseek_v3 / kimi_k2 (BF16, FP8 with 128x128 block scales when fp8, or routed experts in
// compressed-tensors pack-quantized INT4 when int4, as Kimi-K2-Thinking). Each architecture's
// registration turns it into its config.json (Architecture::tiny, model/registry.h).
struct TinyMoeSpec {
  std::string arch = "qwen3_moe";  // config.json's model_type
  uint64_t seed = 1;
  int64_t vocab = 512, hidden = 64, layers = 4;
  int64_t heads = 4, kv_heads = 2, head_dim = 16;                    // GQA (qwen3_moe, gpt_oss)
  int64_t q_lora = 32, kv_lora = 32, nope = 16, rope = 8, v_dim = 16;  // MLA (deepseek_v3, kimi_k2, kimi_*)
  int64_t dense_layers = 1;  // leading dense-MLP layers (mlp_only_layers / first_k_dense_replace)
  int64_t dense_inter = 128, experts = 16, top_k = 4, shared = 1, moe_inter = 64;
  int64_t expert_groups = 1, topk_groups = 1, sparse_step = 1, window = 8;
  bool norm_topk = true, fp8 = false, int4 = false;
  double routed_scaling = 1.0, rope_theta = 10000.0;
  int shards = 2;
  // kimi_k3 / kimi_linear only (TinySpec's fields of the same names).
  std::vector<int64_t> mla_layers = {4, 8, 9};
  int64_t kda_heads = 4, kda_head_dim = 16, conv_kernel = 4, latent = 32, block = 3;
};

// What an architecture's make-tiny hook gives: config.json's text and the ids that
// generation_config.json names.
struct TinyConfig {
  std::string config_json;
  int64_t bos = 0, eos = 0;
};

// The config.json text `spec` implies (through spec.arch's registration).
std::string tiny_moe_config_json(const TinyMoeSpec& spec);
// Writes config.json, generation_config.json, the shards and their index (as write_tiny_checkpoint)
// of spec.arch's tensor roster; refuses a model_type no registered architecture writes.
void write_tiny_moe_checkpoint(const TinyMoeSpec& spec, const std::string& dir,
                               void (*progress)(int64_t done, int64_t total) = nullptr);
// Every model_type make-tiny writes, in registry order.
std::vector<std::string> tiny_model_types();
// Whether a K3 DSpark drafter (write_tiny_dspark) can be matched to a target of this model_type.
bool dspark_fits(const std::string& model_type);
// For the architectures' hooks: the refusal of --fp8 / --int4 where a model_type has no such form,
// and a config finished with what every MoE family's but Kimi's ends with (hidden_act,
// tie_word_embeddings, dtype, bos / eos / pad = vocab - 3, - 2, - 1).
void refuse_quantized_forms(const TinyMoeSpec& spec);
TinyConfig finish_tiny_config(const nlohmann::json& config, const TinyMoeSpec& spec);

// A tiny Qwen3 dense model (transformers' Qwen3ForCausalLM layout, BF16, one safetensors file).
struct TinyQwen3Spec {
  uint64_t seed = 1;
  int64_t vocab = 384, hidden = 64, intermediate = 96, layers = 3;
  int64_t heads = 4, kv_heads = 2, head_dim = 16;
  double rope_theta = 10000.0;
  bool tied = false;  // tie_word_embeddings: no lm_head.weight is written
  int32_t bos = -1, eos = -1;  // -1: vocab - 2 and vocab - 1
};

std::string tiny_qwen3_config_json(const TinyQwen3Spec& spec);
void write_tiny_qwen3_checkpoint(const TinyQwen3Spec& spec, const std::string& dir);

// A random K3 DSpark drafter for a given target: the target's hidden size and vocabulary, its own
// small attention and MLP sizes, K3's RoPE/YaRN constants (θ 50000, factor 32 over 32768).
struct TinyDSparkSpec {
  uint64_t seed = 2;
  int64_t layers = 2, heads = 4, q_lora = 32, kv_lora = 32, nope = 16, rope = 8, v_dim = 16, inter = 128;
  int64_t markov_rank = 16, draft_tokens = 7;
  std::vector<int64_t> target_layer_ids;  // empty: up to three layers spread over the target
};

// The config.json text `spec` implies for `target`.
std::string tiny_dspark_config_json(const TinyDSparkSpec& spec, const KimiConfig& target);

// Writes config.json and model.safetensors (the full roster) into `dir`, atomically per file.
void write_tiny_dspark(const TinyDSparkSpec& spec, const KimiConfig& target, const std::string& dir);

}  // namespace sluice::model
