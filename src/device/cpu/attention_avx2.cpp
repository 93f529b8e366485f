// The absorbed attention's tile scores and context sums on 8 lanes for AVX2 (simd_kernels.h;
// attention_avx512.cpp has them on 16): the bits of the 4-lane versions and the scalar loops.
#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx2.h"
#include "device/cpu/simd_kernels.h"

namespace sluice::device {

void tile_scores_avx2(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                      float scale, float* out) {
  simd::tile_scores<avx2::Avx2Lanes>(qT, lat, kvr, kpe, rope, count, scale, out);
}

void context_rows_avx2(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr,
                         int64_t p0, int64_t p1, int64_t rows) {
  simd::context_rows<avx2::Avx2Lanes>(ctx, ldc, s, stride, lat, kvr, p0, p1, rows);
}

}  // namespace sluice::device
