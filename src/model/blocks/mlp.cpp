// The gated MLP over the pass's rows: one launch for gate and up, the activation, then down.
#include "model/blocks/mlp.h"

namespace sluice::model {

void mlp_forward(device::Device& d, const MlpWeights& w, const device::Activation& act, const device::Buf& x,
                 device::Buf out) {
  device::ScratchScope scope(d);
  const int64_t T = x.rows, I = w.gate.rows;
  device::Buf g = d.scratch(device::BufType::F32, T, I);
  device::Buf u = d.scratch(device::BufType::F32, T, I);
  const device::LinearOut gu[] = {{&w.gate, g}, {&w.up, u}};
  d.linear(x, gu);
  d.gated_act(act, g, u);
  const device::LinearOut down[] = {{&w.down, out}};
  d.linear(g, down);
}

}  // namespace sluice::model
