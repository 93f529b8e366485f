// Shared expert record layouts.
#include "model/blocks/expert_layouts.h"

#include "core/error.h"

namespace sluice::model {

void add_per_expert_swiglu(store::ExpertLayout& layout, const std::string& prefix, int64_t hidden, int64_t inter,
                           format::WeightQuant quant) {
  using store::ExpertSegment;
  using store::ExpertSlot;
  using store::SegmentRole;
  const struct {
    ExpertSlot slot;
    const char* name;
    int64_t rows, cols;
  } mats[] = {{ExpertSlot::Gate, "gate_proj", inter, hidden},
              {ExpertSlot::Up, "up_proj", inter, hidden},
              {ExpertSlot::Down, "down_proj", hidden, inter}};
  for (const auto& m : mats) {
    const std::string base = prefix + m.name;
    auto add = [&](SegmentRole role, const char* suffix, DType dtype, std::vector<int64_t> shape) {
      uint64_t bytes = uint64_t(dtype_size(dtype));
      for (int64_t d : shape) bytes *= uint64_t(d);
      layout.add(ExpertSegment{.slot = m.slot, .role = role, .key = cat(m.name, suffix), .dtype = dtype,
                               .shape = std::move(shape), .bytes = bytes, .tensor = base + suffix});
    };
    switch (quant) {
      case format::WeightQuant::None:
        layout.matrices.push_back({m.slot, device::WeightType::BF16, m.rows, m.cols});
        add(SegmentRole::Data, ".weight", DType::BF16, {m.rows, m.cols});
        break;
      case format::WeightQuant::Fp8Block: {
        const int64_t B = device::kFp8Block;
        layout.matrices.push_back({m.slot, device::WeightType::FP8_E4M3, m.rows, m.cols});
        add(SegmentRole::Data, ".weight", DType::F8_E4M3, {m.rows, m.cols});
        add(SegmentRole::Scales, ".weight_scale_inv", DType::F32, {(m.rows + B - 1) / B, (m.cols + B - 1) / B});
        break;
      }
      case format::WeightQuant::Int4Group32:
        if (m.cols % device::kInt4Group != 0)
          fail("expert layout: INT4 ", m.name, " has ", m.cols, " columns, not a multiple of ", device::kInt4Group);
        layout.matrices.push_back({m.slot, device::WeightType::INT4_G32, m.rows, m.cols});
        add(SegmentRole::Data, ".weight_packed", DType::I32, {m.rows, m.cols / 8});
        add(SegmentRole::Scales, ".weight_scale", DType::BF16, {m.rows, m.cols / device::kInt4Group});
        add(SegmentRole::Shape, ".weight_shape", DType::I32, {2});
        break;
    }
  }
}

store::ExpertBank per_expert_swiglu_bank(int64_t layers, int64_t experts, const std::function<bool(int)>& is_moe,
                                         int64_t hidden, int64_t inter, format::WeightQuant quant) {
  store::ExpertBank b;
  b.num_layers = layers;
  if (experts == 0) return b;
  b.num_experts = experts;
  for (int l = 0; l < int(layers); ++l)
    if (is_moe(l)) b.moe_layers.push_back(l);
  add_per_expert_swiglu(b.layout, "model.layers.{L}.mlp.experts.{E}.", hidden, inter, quant);
  return b;
}

}  // namespace sluice::model
