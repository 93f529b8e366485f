// The KDA block of the Kimi family: q/k/v, decay (f_a→f_b), β and output-gate projections of the
// normed input in one launch, the device's KDA op (conv, norms, gate, delta rule, output norm),
// then o_proj.
#pragma once
#include <atomic>

#include "device/device.h"
#include "model/pass_options.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct KdaWeights {
  device::Weight q, k, v, f_a, f_b, b, g, g_a, g_b, o;  // g (full rank) or g_a/g_b (low rank)
  Param q_conv, k_conv, v_conv;                          // [P, K]
  Param dt_bias, a_log, o_norm;                          // [P], [heads], [head_dim]
  device::KdaOp op;                                     // shape and the kept parameters (set after keep)
  bool full_rank_gate = false;
  // Points op's parameter views at the kept parameters.
  void bind_op();
};

// x: [T, H] normed attention input; out: [T, H]. The state is read from `from` and left in `to`.
void kda_forward(device::Device& d, const KdaWeights& w, const device::Buf& x, const device::KdaState& from,
                 device::KdaState& to, const device::KdaRecord* rec, device::Buf out,
                 const std::atomic<bool>* cancel = nullptr);

}  // namespace sluice::model
