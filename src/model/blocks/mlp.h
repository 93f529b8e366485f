// The gated MLP: out = down(act(gate·x, up·x)) (dense layers, shared experts, SwiGLU drafters).
#pragma once
#include "kernels/device.h"

namespace sluice::model {

struct MlpWeights {
  kernels::Weight gate, up, down;
};

void mlp_forward(kernels::Device& d, const MlpWeights& w, const kernels::Activation& act, const kernels::Buf& x,
                 kernels::Buf out);

}  // namespace sluice::model
