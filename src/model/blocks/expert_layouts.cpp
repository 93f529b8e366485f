// Shared expert record layouts.
#include "model/blocks/expert_layouts.h"

#include "core/error.h"

namespace sluice::model {

void add_per_expert_swiglu(store::ExpertLayout& layout, const std::string& prefix, int64_t hidden, int64_t inter,
                           bool fp8) {
  using store::ExpertSegment;
  using store::ExpertSlot;
  using store::SegmentRole;
  const int64_t B = kernels::kFp8Block;
  const struct {
    ExpertSlot slot;
    const char* name;
    int64_t rows, cols;
  } mats[] = {{ExpertSlot::Gate, "gate_proj", inter, hidden},
              {ExpertSlot::Up, "up_proj", inter, hidden},
              {ExpertSlot::Down, "down_proj", hidden, inter}};
  for (const auto& m : mats) {
    layout.matrices.push_back({m.slot, fp8 ? kernels::WeightType::FP8_E4M3 : kernels::WeightType::BF16, m.rows, m.cols});
    const std::string base = prefix + m.name;
    layout.add(ExpertSegment{.slot = m.slot, .role = SegmentRole::Data, .key = cat(m.name, ".weight"),
                             .dtype = fp8 ? DType::F8_E4M3 : DType::BF16, .shape = {m.rows, m.cols},
                             .bytes = uint64_t(m.rows * m.cols * (fp8 ? 1 : 2)), .tensor = base + ".weight"});
    if (!fp8) continue;
    const int64_t gr = (m.rows + B - 1) / B, gc = (m.cols + B - 1) / B;
    layout.add(ExpertSegment{.slot = m.slot, .role = SegmentRole::Scales, .key = cat(m.name, ".weight_scale_inv"),
                             .dtype = DType::F32, .shape = {gr, gc}, .bytes = uint64_t(gr * gc * 4),
                             .tensor = base + ".weight_scale_inv"});
  }
}

}  // namespace sluice::model
