// gpt-oss (transformers' GptOssForCausalLM) as a target: embedding; per layer RMSNorm, GQA with
// q/k/v/o biases, rotate-half YaRN RoPE and one learned sink logit per head (a softmax term whose
// share is dropped), over a sliding window on the sliding layers; RMSNorm and a MoE whose router
// (with bias) takes the top-k logits and softmaxes them; experts are MXFP4 as released, gate and
// up interleaved in one matrix, with biases and the clamped SwiGLU; final norm and lm_head. Its
// state is a KV cache (model/cache_model.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/gpt_oss_config.h"
#include "format/safetensors.h"
#include "model/blocks/gqa.h"
#include "model/blocks/moe.h"
#include "model/cache_model.h"
#include "model/registry.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct GptOssLayerWeights {
  GqaWeights attn;
  MoeWeights moe;  // the router (weight + bias); the experts come from the provider
  Param input_norm, post_norm;
};

struct GptOssWeights {
  device::Weight embed, lm_head;
  Param final_norm;
  std::vector<GptOssLayerWeights> layers;
};

// gpt-oss's one tensor list (make-tiny writes this order) and its expert bank: per layer one fused
// tensor per part, experts along the first dimension, as released.
TensorList gpt_oss_tensors(const GptOssConfig& c, GptOssWeights* w);
store::ExpertBank gpt_oss_expert_bank(const GptOssConfig& c);
// make-tiny's hook (gpt_oss_tiny.cpp).
TinyConfig gpt_oss_tiny(const TinyMoeSpec& spec);
extern const Architecture kGptOssArchitecture;

class GptOssModel final : public CacheModel {
 public:
  static std::unique_ptr<GptOssModel> load(const LoadOptions& opt);
  const GptOssConfig& config() const { return config_; }

  int64_t pass_bytes_per_row(bool record) const override;
  const device::Weight& embedding() const override { return weights_.embed; }
  const device::Weight& lm_head() const override { return weights_.lm_head; }

 private:
  GptOssModel() = default;
  void attention(CacheState& st, size_t layer, int64_t base, const device::Buf& rope, const PassOptions& opt,
                 const device::Buf& x, device::Buf out) override;

  GptOssConfig config_;
  format::TensorSet tensors_;
  GptOssWeights weights_;
  GqaSpec full_, sliding_;
};

}  // namespace sluice::model
