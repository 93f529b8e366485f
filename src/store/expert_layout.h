// The byte layout of one routed expert as one record: its tensors (w1 gate, w2 down, w3 up; for
// MXFP4 each as packed codes then E8M0 scales, the K3 raw-v1 order) back to back, so one expert
// is one contiguous read. Builds weight views over a record and validates its untrusted bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/kimi_config.h"
#include "store/expert_provider.h"

namespace sluice::store {

struct ExpertSegment {
  int which = 1;           // 1 gate, 2 down, 3 up
  std::string part;        // "weight", "weight_packed" or "weight_scale"
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t offset = 0;     // within the record
  uint64_t bytes = 0;
};

struct ExpertLayout {
  std::vector<ExpertSegment> segments;
  uint64_t record_bytes = 0;  // sum of segment bytes
  uint64_t slot_bytes = 0;    // record rounded up to kAlign (what a read transfers)
  bool mxfp4 = false;
  int64_t inter = 0, input = 0;  // moe_intermediate_size, expert input width

  static constexpr uint64_t kAlign = 4096;
  static ExpertLayout from_config(const format::KimiConfig& c);

  // Views over a record whose segments start at record + segment.offset.
  ExpertWeights views(const std::byte* record) const;
  // Views over segments that live at separate addresses (one pointer per segment).
  ExpertWeights views(const std::vector<const std::byte*>& segment_data) const;
  // Throws naming `what` if an MXFP4 scale byte is 0 or 255 (they never occur in valid checkpoints).
  void validate(const std::vector<const std::byte*>& segment_data, const std::string& what) const;
};

}  // namespace sluice::store
