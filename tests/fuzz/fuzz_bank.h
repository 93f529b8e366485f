// The small fixed expert bank of the manifest and install-record fuzz targets (and of the unit
// test that replays their seeds): 2 layers, layer 1 with 2 experts of one 16-byte U8 segment.
#pragma once
#include "core/dtype.h"
#include "store/expert_bank.h"

namespace sluice::testing {

inline store::ExpertBank fuzz_bank() {
  store::ExpertBank b;
  b.num_layers = 2;
  b.num_experts = 2;
  b.moe_layers = {1};
  store::ExpertSegment s;
  s.key = "w";
  s.dtype = DType::U8;
  s.shape = {16};
  s.bytes = 16;
  s.tensor = "l{L}.e{E}";
  b.layout.add(s);
  return b;
}

}  // namespace sluice::testing
