// Qwen3 dense (transformers' Qwen3ForCausalLM) as a target and as a draft: embedding; per layer
// RMSNorm, GQA attention with per-head q_norm/k_norm before RoPE (rotate-half pairing: channel i
// with i + head_dim/2), SwiGLU MLP, both residual; final norm and lm_head (or the tied
// embedding). Its state is a KV cache, so any suffix of a pass can be dropped by cutting the
// length back.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/qwen3_config.h"
#include "format/safetensors.h"
#include "model/blocks/gqa.h"
#include "model/blocks/mlp.h"
#include "model/registry.h"
#include "model/target.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct Qwen3LayerWeights {
  GqaWeights attn;
  MlpWeights mlp;
  Param input_norm, post_norm;
};

struct Qwen3Weights {
  kernels::Weight embed, lm_head;
  Param final_norm;
  std::vector<Qwen3LayerWeights> layers;
};

// Qwen3's one tensor list, in the order transformers saves it (make-tiny writes this order).
TensorList qwen3_tensors(const format::Qwen3Config& c, Qwen3Weights* w);
extern const Architecture kQwen3Architecture;

class Qwen3Model final : public Target {
 public:
  static std::unique_ptr<Qwen3Model> load(const LoadOptions& opt);
  static std::unique_ptr<Qwen3Model> load(const std::string& dir);

  const format::Qwen3Config& config() const { return config_; }

  const TargetInfo& info() const override { return info_; }
  kernels::Device& device() const override { return *dev_; }
  const store::ExpertBank* expert_bank() const override { return nullptr; }
  void set_expert_provider(store::ExpertProvider*) override {}
  store::ExpertProvider* expert_provider() const override { return nullptr; }

  std::unique_ptr<State> new_state() const override;
  void forward(State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) override;
  void commit_prefix(State& st, int64_t n) override;
  std::unique_ptr<Snapshot> new_snapshot() const override;
  void save(const State& st, Snapshot& snap) const override;
  void restore(State& st, const Snapshot& snap) const override;
  std::vector<float> state_values(const State& st) const override;
  int64_t pass_bytes_per_row(bool record) const override;
  const TargetCounters& counters() const override { return counters_; }
  const kernels::Weight& embedding() const override { return weights_.embed; }
  const kernels::Weight& lm_head() const override { return weights_.lm_head; }

  // Keeps the first n positions (0 <= n <= length): exactly the state of a sequence that only ever
  // saw those n tokens.
  bool truncate(State& st, int64_t n) const override;

 private:
  Qwen3Model() = default;

  format::Qwen3Config config_;
  TargetInfo info_;
  kernels::Device* dev_ = nullptr;
  format::TensorSet tensors_;
  Qwen3Weights weights_;
  GqaSpec gqa_;
  kernels::RopeSpec rope_;
  TargetCounters counters_;
  std::vector<int> capture_slot_;
};

}  // namespace sluice::model
