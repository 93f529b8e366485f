// Routed experts resident in the mapped safetensors checkpoint (all in RAM): the reference
// ExpertProvider the streaming store must match bit for bit.
#pragma once
#include <vector>

#include "format/kimi_config.h"
#include "format/safetensors.h"
#include "store/expert_layout.h"

namespace sluice::store {

class ResidentExperts : public ExpertProvider {
 public:
  // Checks every expert tensor (present, dtype, shape, valid scales); throws naming it.
  ResidentExperts(const format::KimiConfig& c, const format::TensorSet& ts);
  void begin(int layer, std::span<const int32_t> experts) override;
  int next_ready(ExpertWeights* out) override;
  void release(int) override {}

 private:
  int64_t num_experts_;
  std::vector<std::vector<ExpertWeights>> by_layer_;  // empty for dense layers
  std::vector<const ExpertWeights*> pending_;
  size_t next_ = 0;
};

// The checkpoint tensors of one expert in layout order, checked against the layout.
std::vector<const std::byte*> expert_segments(const format::KimiConfig& c, const ExpertLayout& layout,
                                              const format::TensorSet& ts, int layer, int expert);

}  // namespace sluice::store
