// The gated MLP over the pass's rows: one launch for gate and up, the activation, then down.
#include "model/blocks/mlp.h"

namespace sluice::model {

void mlp_forward(kernels::Device& d, const MlpWeights& w, const kernels::Activation& act, const kernels::Buf& x,
                 kernels::Buf out) {
  kernels::ScratchScope scope(d);
  const int64_t T = x.rows, I = w.gate.rows;
  kernels::Buf g = d.scratch(kernels::BufType::F32, T, I);
  kernels::Buf u = d.scratch(kernels::BufType::F32, T, I);
  const kernels::LinearOut gu[] = {{&w.gate, g}, {&w.up, u}};
  d.linear(x, gu);
  d.gated_act(act, g, u);
  const kernels::LinearOut down[] = {{&w.down, out}};
  d.linear(g, down);
}

}  // namespace sluice::model
