// KDA's delta step sixteen value columns at a time (simd_kernels.h): each column's arithmetic is
// delta_step_generic's (cpu_kda.cpp) in its order, with the same bits.
#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx512.h"
#include "device/cpu/simd_kernels.h"

namespace sluice::device {

void delta_step_avx512(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                       const float* v, const float* g, float beta, float* kv_mem, float* o) {
  simd::delta_step<avx512::Avx512Lanes>(S_in, S, dk, dv, q, k, v, g, beta, kv_mem, o);
}

}  // namespace sluice::device
