// The Qwen3 family as a target (and Qwen3 dense as a draft): transformers' Qwen3ForCausalLM and
// Qwen3MoeForCausalLM. Embedding; per layer RMSNorm, GQA attention with per-head q_norm/k_norm
// before RoPE (rotate-half pairing: channel i with i + head_dim/2), then a SwiGLU MLP or, on the
// sparse layers of qwen3_moe, a softmax-routed MoE (top-k of the softmax over every expert,
// renormalised when norm_topk_prob) whose experts are streamed; final norm and lm_head (or the
// tied embedding). Its state is a KV cache (model/cache_model.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/arch/qwen3_config.h"
#include "format/safetensors.h"
#include "model/blocks/gqa.h"
#include "model/blocks/mlp.h"
#include "model/blocks/moe.h"
#include "model/cache_model.h"
#include "model/registry.h"
#include "model/target.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct Qwen3LayerWeights {
  GqaWeights attn;
  MlpWeights mlp;  // dense layers
  MoeWeights moe;  // sparse layers (the router; the experts come from the provider)
  Param input_norm, post_norm;
};

struct Qwen3Weights {
  device::Weight embed, lm_head;
  Param final_norm;
  std::vector<Qwen3LayerWeights> layers;
};

// Qwen3's one tensor list, in the order transformers saves it (make-tiny writes this order).
TensorList qwen3_tensors(const Qwen3Config& c, Qwen3Weights* w);
// The routed experts of a qwen3_moe config (one BF16 tensor per expert and matrix, as released).
store::ExpertBank qwen3_expert_bank(const Qwen3Config& c);
// make-tiny's hook (qwen3_tiny.cpp): qwen3_moe or dense qwen3.
TinyConfig qwen3_tiny(const TinyMoeSpec& spec);
extern const Architecture kQwen3Architecture;

class Qwen3Model final : public CacheModel {
 public:
  static std::unique_ptr<Qwen3Model> load(const LoadOptions& opt);
  static std::unique_ptr<Qwen3Model> load(const std::string& dir);

  const Qwen3Config& config() const { return config_; }

  int64_t pass_bytes_per_row(bool record) const override;
  const device::Weight& embedding() const override { return weights_.embed; }
  const device::Weight& lm_head() const override { return weights_.lm_head; }

 private:
  Qwen3Model() = default;
  void attention(CacheState& st, size_t layer, int64_t base, const device::Buf& rope, const PassOptions& opt,
                 const device::Buf& x, device::Buf out) override;

  Qwen3Config config_;
  format::TensorSet tensors_;
  Qwen3Weights weights_;
  GqaSpec gqa_;
};

}  // namespace sluice::model
