// The small fixed expert bank of the manifest and install-record fuzz targets (and of the unit
// test that replays their seeds): 2 layers, layer 1 with 2 experts of one U8 segment, 16 bytes
// (install records) or, for manifests, 5000 (a slot of two pages, so a record can be striped).
#pragma once
#include "core/dtype.h"
#include "store/expert_bank.h"

namespace sluice::testing {

inline store::ExpertBank fuzz_bank(int64_t segment_bytes = 16) {
  store::ExpertBank b;
  b.num_layers = 2;
  b.num_experts = 2;
  b.moe_layers = {1};
  store::ExpertSegment s;
  s.key = "w";
  s.dtype = DType::U8;
  s.shape = {segment_bytes};
  s.bytes = uint64_t(segment_bytes);
  s.tensor = "l{L}.e{E}";
  b.layout.add(s);
  return b;
}

}  // namespace sluice::testing
