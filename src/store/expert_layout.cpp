// Expert record layout, views and validation.
#include "store/expert_layout.h"

#include "core/error.h"

namespace sluice::store {

ExpertLayout ExpertLayout::from_config(const format::KimiConfig& c) {
  ExpertLayout l;
  l.mxfp4 = c.experts_mxfp4;
  l.inter = c.moe_intermediate_size;
  l.input = c.expert_input_size();
  uint64_t off = 0;
  for (int which : {1, 2, 3}) {
    int64_t rows = which == 2 ? l.input : l.inter, cols = which == 2 ? l.inter : l.input;
    auto add = [&](const char* part, DType dt, std::vector<int64_t> shape, uint64_t bytes) {
      l.segments.push_back(ExpertSegment{which, part, dt, std::move(shape), off, bytes});
      off += bytes;
    };
    if (l.mxfp4) {
      add("weight_packed", DType::U8, {rows, cols / 2}, uint64_t(rows * cols / 2));
      add("weight_scale", DType::U8, {rows, cols / 32}, uint64_t(rows * cols / 32));
    } else {
      add("weight", DType::BF16, {rows, cols}, uint64_t(rows * cols * 2));
    }
  }
  l.record_bytes = off;
  l.slot_bytes = (off + kAlign - 1) / kAlign * kAlign;
  return l;
}

ExpertWeights ExpertLayout::views(const std::vector<const std::byte*>& seg) const {
  ExpertWeights w;
  kernels::Weight* by_which[4] = {nullptr, &w.gate, &w.down, &w.up};
  for (size_t i = 0; i < segments.size(); ++i) {
    const ExpertSegment& s = segments[i];
    kernels::Weight& out = *by_which[s.which];
    out.rows = s.which == 2 ? input : inter;
    out.cols = s.which == 2 ? inter : input;
    if (s.part == "weight_scale") {
      out.scales = reinterpret_cast<const uint8_t*>(seg[i]);
    } else {
      out.data = seg[i];
      out.type = mxfp4 ? kernels::WeightType::MXFP4 : kernels::WeightType::BF16;
    }
  }
  return w;
}

ExpertWeights ExpertLayout::views(const std::byte* record) const {
  std::vector<const std::byte*> seg;
  for (const auto& s : segments) seg.push_back(record + s.offset);
  return views(seg);
}

void ExpertLayout::validate(const std::vector<const std::byte*>& seg, const std::string& what) const {
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].part != "weight_scale") continue;
    const auto* b = reinterpret_cast<const uint8_t*>(seg[i]);
    for (uint64_t j = 0; j < segments[i].bytes; ++j)
      if (!mxfp4_scale_valid(b[j]))
        fail(what, ": w", segments[i].which, " E8M0 scale byte ", int(b[j]), " at element ", j,
             " (0 and 255 never occur in valid MXFP4 experts)");
  }
}

}  // namespace sluice::store
