// The gated activations' element formula, shared by the reference kernel (ops_ref.cu) and the
// fused expert kernel (gemv_fast.cu). Both files are compiled with -fmad=false and the
// transcendentals are mathf.h's, so the fused kernel writes the reference kernel's bits.
#pragma once
#include "device/device.h"
#include "device/mathf.h"

namespace sluice::device::cuda {

__device__ __forceinline__ float gated_value(const Activation& a, float g, float u) {
  namespace mf = sluice::mathf;
  switch (a.kind) {
    case ActKind::SiTU: return mf::situ(g, u, a.beta_gate, a.beta_up);
    case ActKind::SiLU: return mf::silu(g) * u;
    case ActKind::ClampedSwiGLU: {
      const float gc = g < a.limit ? g : a.limit;
      const float uc = u < -a.limit ? -a.limit : (u > a.limit ? a.limit : u);
      return (uc + 1.0f) * (gc * mf::sigmoid(gc * a.alpha));
    }
  }
  return 0.0f;
}

}  // namespace sluice::device::cuda
