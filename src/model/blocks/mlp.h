// The gated MLP: out = down(act(gate·x, up·x)) (dense layers, shared experts, SwiGLU drafters).
#pragma once
#include "device/device.h"

namespace sluice::model {

struct MlpWeights {
  device::Weight gate, up, down;
};

void mlp_forward(device::Device& d, const MlpWeights& w, const device::Activation& act, const device::Buf& x,
                 device::Buf out);

}  // namespace sluice::model
