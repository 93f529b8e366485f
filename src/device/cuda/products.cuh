// Device helpers shared by the two fast product files: the CUDA-core kernels (gemv_fast.cu) and
// the tensor-core kernels (mma_fast.cu). Both are compiled with -fmad=false.
#pragma once
#include <cstdint>

#include "device/device.h"

namespace sluice::device::cuda {

// a·b + c on two BF16 lanes, rounded once to nearest even (subnormals kept).
__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Codes m and m + 4 (m = 0..3) of an INT4_G32 code word (column j = bits [4j, 4j+4), code q + 8) as
// one bf16 pair, each bf16(q·s) as the oracle widens it, with the group's scale in both halves of
// s2: the codes go in as 128 + code (0x4300 | code), an exact fma with 1 and -136 gives q, and an
// fma with s and -0 gives q·s rounded once to BF16 (the product needs at most 12 bits).
__device__ __forceinline__ uint32_t int4_pair(uint32_t word, int m, uint32_t s2) {
  const uint32_t codes = ((word >> (4 * m)) & 0x000f000fu) | 0x43004300u;
  return bf16x2_fma(bf16x2_fma(codes, 0x3f803f80u, 0xc308c308u), s2, 0x80008000u);
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int k) {
  return k == 0 ? q.x : k == 1 ? q.y : k == 2 ? q.z : q.w;
}

__device__ __forceinline__ float load_bias(const Weight& w, int64_t r) {
  return w.bias_type == DType::BF16 ? __uint_as_float(uint32_t(static_cast<const uint16_t*>(w.bias)[r]) << 16)
                                    : static_cast<const float*>(w.bias)[r];
}

}  // namespace sluice::device::cuda
