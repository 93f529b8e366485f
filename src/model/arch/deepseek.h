// DeepSeek-V3 and Kimi-K2 (transformers' DeepseekV3ForCausalLM) as a target: embedding; per layer
// RMSNorm, MLA with RoPE on the rope part (absorbed over a compact cache of latents and rotated
// k_pe, with YaRN's softmax mscale); RMSNorm and a dense SwiGLU MLP on the first
// first_k_dense_replace layers, a MoE after them (sigmoid router with correction bias and grouped
// top-k, renormalised and scaled, routed experts streamed, plus the shared experts); final norm and
// lm_head. Weights are BF16 or FP8 e4m3 with 128x128 block scales as released, computed on directly
// (kv_b, which the absorbed attention reads as rows, is widened to F32 at load). Its state is the
// compact MLA cache (model/cache_model.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/deepseek_config.h"
#include "format/safetensors.h"
#include "model/blocks/mla.h"
#include "model/blocks/mlp.h"
#include "model/blocks/moe.h"
#include "model/cache_model.h"
#include "model/registry.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct DeepSeekLayerWeights {
  MlaWeights attn;
  MlpWeights dense;
  MoeWeights moe;
  Param input_norm, post_norm;
};

struct DeepSeekWeights {
  device::Weight embed, lm_head;
  Param final_norm;
  std::vector<DeepSeekLayerWeights> layers;
};

TensorList deepseek_tensors(const DeepSeekConfig& c, DeepSeekWeights* w);
store::ExpertBank deepseek_expert_bank(const DeepSeekConfig& c);
// make-tiny's hook (deepseek_tiny.cpp): BF16, --fp8 or --int4.
TinyConfig deepseek_tiny(const TinyMoeSpec& spec);
extern const Architecture kDeepSeekArchitecture;

class DeepSeekModel final : public CacheModel {
 public:
  static std::unique_ptr<DeepSeekModel> load(const LoadOptions& opt);
  const DeepSeekConfig& config() const { return config_; }

  int64_t pass_bytes_per_row(bool record) const override;
  const device::Weight& embedding() const override { return weights_.embed; }
  const device::Weight& lm_head() const override { return weights_.lm_head; }

 private:
  DeepSeekModel() = default;
  void attention(CacheState& st, size_t layer, int64_t base, const device::Buf& rope, const PassOptions& opt,
                 const device::Buf& x, device::Buf out) override;

  DeepSeekConfig config_;
  format::TensorSet tensors_;
  DeepSeekWeights weights_;
  std::vector<std::vector<float>> kv_b_f32_;  // per layer: an FP8 kv_b widened (empty otherwise)
  MlaSpec mla_spec_;
};

}  // namespace sluice::model
