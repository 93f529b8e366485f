// Resident experts: views straight into the mapped checkpoint (per-expert or fused tensors).
#include "store/resident_experts.h"

#include "core/error.h"

namespace sluice::store {

std::vector<const std::byte*> expert_segments(const ExpertBank& bank, const format::TensorSet& ts, int layer,
                                              int expert) {
  std::vector<const std::byte*> out;
  for (const ExpertSegment& s : bank.layout.segments) {
    std::string name = bank.tensor_name(s, layer, expert);
    const format::TensorInfo& t = ts.get(name);
    const std::vector<int64_t> shape = bank.tensor_shape(s);
    if (t.dtype != s.dtype || t.shape != shape) {
      std::string want = "[";
      for (size_t i = 0; i < shape.size(); ++i) want += cat(i ? ", " : "", shape[i]);
      fail(ts.dir(), ": tensor ", name, " is ", dtype_name(t.dtype), " with ", t.shape.size(),
           " dims; the config implies ", dtype_name(s.dtype), " ", want, "]");
    }
    out.push_back(t.data + bank.offset_in_tensor(s, expert));
  }
  return out;
}

ResidentExperts::ResidentExperts(const ExpertBank& bank, const format::TensorSet& ts, device::Device* keep_on)
    : num_experts_(bank.num_experts) {
  const bool keep = keep_on && keep_on->place() != device::Place::Host;
  by_layer_.resize(size_t(bank.num_layers));
  for (int l : bank.moe_layers) {
    if (l < 0 || l >= int(bank.num_layers)) fail("expert bank: MoE layer ", l, " is outside the model's ", bank.num_layers, " layers");
    for (int e = 0; e < int(bank.num_experts); ++e) {
      auto seg = expert_segments(bank, ts, l, e);
      bank.layout.validate(seg, cat(ts.dir(), ": expert ", e, " of layer ", l));
      device::ExpertView v = bank.layout.views(seg);
      // Resident views are made once: check their FP8 codes once here (streamed records are not
      // checked per read, so their products keep the kernels' scan).
      for (device::Weight* w : {&v.gate, &v.up, &v.down})
        if (w->type == device::WeightType::FP8_E4M3 && !w->empty())
          w->fp8_finite = !device::fp8_has_nan_code(static_cast<const uint8_t*>(w->data), size_t(w->rows * w->cols));
      if (keep) {
        v.gate = keep_on->keep(v.gate);
        if (!v.up.empty()) v.up = keep_on->keep(v.up);
        v.down = keep_on->keep(v.down);
      }
      by_layer_[size_t(l)].push_back(v);
    }
  }
}

void ResidentExperts::begin(int layer, std::span<const int32_t> experts) {
  if (layer < 0 || size_t(layer) >= by_layer_.size() || by_layer_[size_t(layer)].empty())
    fail("layer ", layer, " has no routed experts");
  const auto& all = by_layer_[size_t(layer)];
  pending_.clear();
  next_ = 0;
  for (int32_t e : experts) {
    if (e < 0 || e >= num_experts_) fail("expert ", e, " of layer ", layer, " does not exist");
    pending_.push_back(&all[size_t(e)]);
  }
}

int ResidentExperts::next_ready(device::ExpertView* out) {
  if (next_ >= pending_.size()) return -1;
  *out = *pending_[next_];
  return int(next_++);
}

}  // namespace sluice::store
