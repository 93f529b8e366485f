// The Kimi family's expert bank: every layer whose MLP is MoE holds num_experts routed experts,
// each w1 (gate), w2 (down), w3 (up) as one tensor per expert, BF16 or MXFP4 (packed E2M1 codes,
// then E8M0 scales per 32 columns: the K3 raw-v1 record order).
#include "model/arch/kimi.h"

namespace sluice::model {

store::ExpertBank kimi_expert_bank(const KimiConfig& c) {
  using store::ExpertSegment;
  using store::ExpertSlot;
  using store::SegmentRole;
  store::ExpertBank b;
  b.num_layers = c.num_layers;
  b.num_experts = c.num_experts;
  for (int l = 0; l < int(c.num_layers); ++l)
    if (c.mlp[size_t(l)] == MlpKind::MoE) b.moe_layers.push_back(l);
  const int64_t inter = c.moe_intermediate_size, input = c.expert_input_size();
  const device::WeightType type = c.experts_mxfp4 ? device::WeightType::MXFP4 : device::WeightType::BF16;
  const std::string base = c.tensor_prefix + "model.layers.{L}.block_sparse_moe.experts.{E}.w";
  // Record order w1, w2, w3 (gate, down, up).
  for (int which : {1, 2, 3}) {
    const ExpertSlot slot = which == 1 ? ExpertSlot::Gate : which == 2 ? ExpertSlot::Down : ExpertSlot::Up;
    const int64_t rows = which == 2 ? input : inter, cols = which == 2 ? inter : input;
    b.layout.matrices.push_back({slot, type, rows, cols});
    const std::string w = "w" + std::to_string(which);
    auto seg = [&](const char* part, SegmentRole role, DType dt, std::vector<int64_t> shape, uint64_t bytes) {
      b.layout.add(ExpertSegment{.slot = slot, .role = role, .key = w + "." + part, .dtype = dt,
                                 .shape = std::move(shape), .bytes = bytes,
                                 .tensor = base + std::to_string(which) + "." + part});
    };
    if (c.experts_mxfp4) {
      seg("weight_packed", SegmentRole::Data, DType::U8, {rows, cols / 2}, uint64_t(rows * cols / 2));
      seg("weight_scale", SegmentRole::Scales, DType::U8, {rows, cols / 32}, uint64_t(rows * cols / 32));
    } else {
      seg("weight", SegmentRole::Data, DType::BF16, {rows, cols}, uint64_t(rows * cols * 2));
    }
  }
  return b;
}

}  // namespace sluice::model
