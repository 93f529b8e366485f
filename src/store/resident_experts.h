// Routed experts resident in the mapped safetensors checkpoint (all in RAM): the reference
// ExpertProvider the streaming store must match bit for bit. Experts stored one tensor per expert
// and fused per layer (experts along the first dimension) are both served in place. On a device
// that computes elsewhere (a GPU), every expert is kept in that device's memory at load, records
// exactly as in the checkpoint, so a pass moves no expert bytes.
#pragma once
#include <vector>

#include "format/safetensors.h"
#include "device/device.h"
#include "store/expert_bank.h"
#include "store/expert_provider.h"

namespace sluice::store {

class ResidentExperts : public ExpertProvider {
 public:
  // Checks every expert tensor (present, dtype, shape, valid scales); throws naming it. `keep_on`:
  // the device the views must live on (null or a host device: the mapped bytes themselves).
  ResidentExperts(const ExpertBank& bank, const format::TensorSet& ts, device::Device* keep_on = nullptr);
  void begin(int layer, std::span<const int32_t> experts) override;
  int next_ready(device::ExpertView* out) override;
  void release(int) override {}

 private:
  int64_t num_experts_;
  std::vector<std::vector<device::ExpertView>> by_layer_;  // empty for dense layers
  std::vector<const device::ExpertView*> pending_;
  size_t next_ = 0;
};

// The checkpoint bytes of one expert's segments in layout order (into a fused tensor at the
// expert's offset), each tensor checked against the bank; throws naming the tensor.
std::vector<const std::byte*> expert_segments(const ExpertBank& bank, const format::TensorSet& ts, int layer,
                                              int expert);

}  // namespace sluice::store
