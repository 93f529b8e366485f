// Resident experts: views straight into the mapped checkpoint.
#include "store/resident_experts.h"

#include "core/error.h"

namespace sluice::store {

std::vector<const std::byte*> expert_segments(const format::KimiConfig& c, const ExpertLayout& layout,
                                              const format::TensorSet& ts, int layer, int expert) {
  std::vector<const std::byte*> out;
  for (const ExpertSegment& s : layout.segments) {
    std::string name = format::expert_tensor_name(c, layer, expert, s.which, s.part.c_str());
    const format::TensorInfo& t = ts.get(name);
    if (t.dtype != s.dtype || t.shape != s.shape) {
      std::string want = "[";
      for (size_t i = 0; i < s.shape.size(); ++i) want += cat(i ? ", " : "", s.shape[i]);
      fail(ts.dir(), ": tensor ", name, " is ", dtype_name(t.dtype), " with ", t.shape.size(),
           " dims; the config implies ", dtype_name(s.dtype), " ", want, "]");
    }
    out.push_back(t.data);
  }
  return out;
}

ResidentExperts::ResidentExperts(const format::KimiConfig& c, const format::TensorSet& ts)
    : num_experts_(c.num_experts) {
  ExpertLayout layout = ExpertLayout::from_config(c);
  by_layer_.resize(size_t(c.num_layers));
  for (int l = 0; l < int(c.num_layers); ++l) {
    if (c.mlp[size_t(l)] != format::MlpKind::MoE) continue;
    for (int e = 0; e < int(c.num_experts); ++e) {
      auto seg = expert_segments(c, layout, ts, l, e);
      layout.validate(seg, cat(ts.dir(), ": expert ", e, " of layer ", l));
      by_layer_[size_t(l)].push_back(layout.views(seg));
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

int ResidentExperts::next_ready(ExpertWeights* out) {
  if (next_ >= pending_.size()) return -1;
  *out = *pending_[next_];
  return int(next_++);
}

}  // namespace sluice::store
