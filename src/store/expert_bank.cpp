// The expert bank: record layout (segment offsets and sizes), weight views over a record or over
// separate segments, validation of a record's untrusted scale bytes, and the checkpoint tensor
// names, offsets and shapes of each segment.
#include "store/expert_bank.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "core/error.h"

namespace sluice::store {

namespace {

device::Weight& weight_of(device::ExpertView& v, ExpertSlot slot) {
  switch (slot) {
    case ExpertSlot::Gate: return v.gate;
    case ExpertSlot::Up: return v.up;
    case ExpertSlot::Down: return v.down;
  }
  return v.gate;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

}  // namespace

void ExpertLayout::add(ExpertSegment s) {
  const uint64_t elem = uint64_t(dtype_size(s.dtype));
  uint64_t numel = 1;
  for (int64_t d : s.shape) {
    if (d <= 0) fail("expert segment ", s.key, ": shape ", shape_text(s.shape), " has a non-positive dimension");
    numel *= uint64_t(d);
  }
  if (s.bytes != numel * elem)
    fail("expert segment ", s.key, ": ", s.bytes, " bytes, but ", dtype_name(s.dtype), " ", shape_text(s.shape), " holds ",
         numel * elem);
  for (const ExpertSegment& o : segments)
    if (o.key == s.key) fail("expert segment ", s.key, ": key used twice in one expert");
  s.offset = (record_bytes + elem - 1) / elem * elem;
  record_bytes = s.offset + s.bytes;
  slot_bytes = (record_bytes + kAlign - 1) / kAlign * kAlign;
  segments.push_back(std::move(s));
}

const ExpertMatrix& ExpertLayout::matrix(ExpertSlot slot) const {
  for (const ExpertMatrix& m : matrices)
    if (m.slot == slot) return m;
  fail("expert layout: no matrix for slot ", int(slot));
}

namespace {

// The views of an expert whose segment i lies at segment(i) (one body for records and for
// separately mapped tensors; it allocates nothing, views() runs per expert per pass).
template <typename SegmentAt>
device::ExpertView build_views(const ExpertLayout& l, SegmentAt segment) {
  device::ExpertView v;
  v.gate_up_interleaved = l.gate_up_interleaved;
  for (const ExpertMatrix& m : l.matrices) {
    device::Weight& w = weight_of(v, m.slot);
    w.type = m.type;
    w.rows = m.rows;
    w.cols = m.cols;
  }
  for (size_t i = 0; i < l.segments.size(); ++i) {
    const ExpertSegment& s = l.segments[i];
    device::Weight& w = weight_of(v, s.slot);
    switch (s.role) {
      case SegmentRole::Data: w.data = segment(i); break;
      case SegmentRole::Scales: w.scales = segment(i); break;
      case SegmentRole::Bias:
        w.bias = segment(i);
        w.bias_type = s.dtype;
        break;
      case SegmentRole::Shape: break;  // checked by validate(), not computed with
    }
  }
  return v;
}

}  // namespace

device::ExpertView ExpertLayout::views(const std::vector<const std::byte*>& seg) const {
  return build_views(*this, [&](size_t i) { return seg[i]; });
}

device::ExpertView ExpertLayout::views(const std::byte* record) const {
  return build_views(*this, [&](size_t i) { return record + segments[i].offset; });
}

void ExpertLayout::validate(const std::vector<const std::byte*>& seg, const std::string& what) const {
  for (size_t i = 0; i < segments.size(); ++i) {
    const ExpertSegment& s = segments[i];
    if (s.role == SegmentRole::Shape) {
      const ExpertMatrix& m = matrix(s.slot);
      if (s.dtype != DType::I32 || s.bytes != 8) fail(what, ": ", s.key, " must be two I32 values, the bank says otherwise");
      int32_t shape[2];
      std::memcpy(shape, seg[i], 8);
      if (shape[0] != m.rows || shape[1] != m.cols)
        fail(what, ": ", s.key, " is [", shape[0], ", ", shape[1], "], but the matrix is [", m.rows, ", ", m.cols, "]");
      continue;
    }
    if (s.role != SegmentRole::Scales) continue;
    const device::WeightType type = matrix(s.slot).type;
    if (type == device::WeightType::MXFP4) {
      const auto* b = reinterpret_cast<const uint8_t*>(seg[i]);
      for (uint64_t j = 0; j < s.bytes; ++j)
        if (!mxfp4_scale_valid(b[j]))
          fail(what, ": ", s.key, " E8M0 scale byte ", int(b[j]), " at element ", j,
               " (0 and 255 never occur in valid MXFP4 experts)");
    } else if (type == device::WeightType::FP8_E4M3) {
      if (s.dtype != DType::F32) fail(what, ": ", s.key, " FP8 block scales must be F32, the bank says ", dtype_name(s.dtype));
      // The segment may sit at any byte of a mapped checkpoint: read each float by copy.
      for (uint64_t j = 0; j < s.bytes / 4; ++j) {
        float x;
        std::memcpy(&x, seg[i] + j * 4, 4);
        if (!std::isfinite(x) || !(x > 0))
          fail(what, ": ", s.key, " FP8 block scale ", x, " at block ", j,
               " (block scales of valid FP8 experts are finite and positive)");
      }
    } else if (type == device::WeightType::INT4_G32) {
      if (s.dtype != DType::BF16) fail(what, ": ", s.key, " INT4 group scales must be BF16, the bank says ", dtype_name(s.dtype));
      for (uint64_t j = 0; j < s.bytes / 2; ++j) {
        uint16_t b;
        std::memcpy(&b, seg[i] + j * 2, 2);
        if ((b & 0x7f80) == 0x7f80)
          fail(what, ": ", s.key, " INT4 group scale ", bf16_to_f32(b), " at group ", j, " (group scales are finite)");
      }
    }
  }
}

bool ExpertBank::is_moe(int layer) const { return std::binary_search(moe_layers.begin(), moe_layers.end(), layer); }

bool ExpertBank::fused(const ExpertSegment& s) { return s.tensor.find("{E}") == std::string::npos; }

std::string ExpertBank::tensor_name(const ExpertSegment& s, int layer, int expert) const {
  std::string name = s.tensor;
  replace_all(name, "{L}", std::to_string(layer));
  replace_all(name, "{E}", std::to_string(expert));
  return name;
}

uint64_t ExpertBank::offset_in_tensor(const ExpertSegment& s, int expert) const {
  return fused(s) ? uint64_t(expert) * s.bytes : 0;
}

std::vector<int64_t> ExpertBank::tensor_shape(const ExpertSegment& s) const {
  if (!fused(s)) return s.shape;
  std::vector<int64_t> shape{num_experts};
  shape.insert(shape.end(), s.shape.begin(), s.shape.end());
  return shape;
}

std::vector<std::string> ExpertBank::tensor_names() const {
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  auto put = [&](std::string n) {
    if (seen.insert(n).second) names.push_back(std::move(n));
  };
  for (int l : moe_layers) {
    for (const ExpertSegment& s : layout.segments)
      if (fused(s)) put(tensor_name(s, l, 0));
    for (int e = 0; e < int(num_experts); ++e)
      for (const ExpertSegment& s : layout.segments)
        if (!fused(s)) put(tensor_name(s, l, e));
  }
  return names;
}

}  // namespace sluice::store
