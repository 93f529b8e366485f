// The one narrow door through which the model reaches routed experts. The model asks for the
// experts one layer needs for a pass (the union over all rows of the pass) and gets weight views
// back; the resident implementation below points into the checkpoint, the streaming store
// (src/store) will read them from drives. Nothing about files or caches crosses this interface.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/cpu/kernels.h"

namespace sluice::model {

struct ExpertWeights {
  kernels::Weight gate;  // w1 [moe_intermediate, expert_input]
  kernels::Weight down;  // w2 [expert_input, moe_intermediate]
  kernels::Weight up;    // w3 [moe_intermediate, expert_input]
};

class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  // Makes `experts` (unique, ascending) of `layer` available: out[i] holds expert experts[i]'s
  // views, valid until release(layer).
  virtual void request(int layer, std::span<const int32_t> experts, std::span<ExpertWeights> out) = 0;
  // The pass over `layer` is done with the views it was given.
  virtual void release(int layer) = 0;
};

}  // namespace sluice::model
