// Portable fp32 transcendentals for every device: exp, log1p, tanh and the functions built on them
// (sigmoid, SiLU, softplus, SiTU), written as one fixed sequence of IEEE roundings (mul, add,
// div, sqrt, rint) that compiles unchanged for the host and, under nvcc, for the GPU. glibc's
// expf/log1pf/tanhf and CUDA's differ by an ulp here and there; with these the CPU scalar ops and
// the GPU reference ops agree bit for bit. Accuracy (tests/unit/mathf_test.cpp, against long
// double): exp 2 ulp, log1p 3, tanh 6, sigmoid and softplus 4: far inside every golden tolerance.
//
// No expression here may be contracted into a fused multiply-add: the host build is ISO C++
// without -mfma (contraction is off), and on the GPU every product and sum goes through
// __fmul_rn / __fadd_rn, which nvcc never fuses.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SLUICE_HD __host__ __device__ __forceinline__
#else
#define SLUICE_HD inline
#endif

namespace sluice::mathf {

SLUICE_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SLUICE_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SLUICE_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SLUICE_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SLUICE_HD float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
SLUICE_HD float rint(float a) {
#if defined(__CUDA_ARCH__)
  return rintf(a);
#else
  return std::rint(a);
#endif
}
SLUICE_HD float from_bits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}
SLUICE_HD uint32_t to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}
// 2^k for -126 <= k <= 127, exactly.
SLUICE_HD float pow2(int k) { return from_bits(uint32_t(k + 127) << 23); }

// e^x: x = k·ln2 + r with |r| <= ln2/2 (ln2 split in a part whose products with k are exact and a
// small rest), e^r by its Taylor series to r^8 (error below 3e-9 relative), times 2^k in at most
// two exact scalings (so results near the subnormal range are rounded once, at the end).
SLUICE_HD float exp(float x) {
  if (x != x) return x;
  if (x > 88.7228394f) return from_bits(0x7f800000u);
  if (x < -103.972084f) return 0.0f;
  const float k = rint(mul(x, 1.44269502f));
  const float r = sub(sub(x, mul(k, 0.693145752f)), mul(k, 1.42860677e-06f));
  float p = 2.48015873e-05f;              // 1/8!
  p = add(mul(p, r), 1.98412698e-04f);    // 1/7!
  p = add(mul(p, r), 1.38888889e-03f);    // 1/6!
  p = add(mul(p, r), 8.33333333e-03f);    // 1/5!
  p = add(mul(p, r), 4.16666667e-02f);    // 1/4!
  p = add(mul(p, r), 1.66666667e-01f);    // 1/3!
  p = add(mul(p, r), 0.5f);
  p = add(mul(p, r), 1.0f);
  p = add(mul(p, r), 1.0f);
  const int ki = int(k);
  if (ki > 127) return mul(mul(p, pow2(127)), pow2(ki - 127));
  if (ki < -126) return mul(mul(p, pow2(ki + 100)), pow2(-100));
  return mul(p, pow2(ki));
}

// log(m) for m in [sqrt(1/2), sqrt(2)): 2·atanh(s), s = (m-1)/(m+1), |s| <= 0.172, to s^11.
SLUICE_HD float log_reduced(float m) {
  const float s = div(sub(m, 1.0f), add(m, 1.0f)), s2 = mul(s, s);
  float p = 0.0909090909f;                // 1/11
  p = add(mul(p, s2), 0.111111111f);      // 1/9
  p = add(mul(p, s2), 0.142857143f);      // 1/7
  p = add(mul(p, s2), 0.2f);
  p = add(mul(p, s2), 0.333333333f);
  p = add(mul(p, s2), 1.0f);
  return mul(mul(2.0f, s), p);
}

// log(1 + y) for y > -1: for small y its series; else log(u) of u = 1 + y (u = m·2^e), corrected
// by y/(u-1) for the rounding of u (the classic log1p identity).
SLUICE_HD float log1p(float y) {
  if (y != y) return y;
  if (y == -1.0f) return -from_bits(0x7f800000u);
  if (y < -1.0f) return from_bits(0x7fc00000u);
  if (y > 3.4e38f) return y;
  const float ay = y < 0 ? -y : y;
  if (ay < 1e-4f) {
    // y − y²/2 + y³/3, error below y^4/4 <= 2.5e-17 relative.
    return mul(y, add(1.0f, mul(y, add(-0.5f, mul(y, 0.333333333f)))));
  }
  const float u = add(1.0f, y);
  const uint32_t b = to_bits(u);
  int e = int((b >> 23) & 0xff) - 127;
  float m = from_bits((b & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 1.41421356f) {
    m = mul(m, 0.5f);
    e += 1;
  }
  const float log_u = add(mul(float(e), 0.693147182f), log_reduced(m));
  const float um1 = sub(u, 1.0f);
  // u - 1 is exact for u in [1/2, 2] (Sterbenz) and y/(u-1) undoes the rounding of u; above 2 the
  // factor is 1 to within that rounding, which log(u) no longer notices.
  return um1 == y ? log_u : mul(log_u, div(y, um1));
}

// tanh(x): the odd series near 0, 1 − 2/(e^{2|x|} + 1) beyond, ±1 past 9.
SLUICE_HD float tanh(float x) {
  if (x != x) return x;
  const float ax = x < 0 ? -x : x;
  float t;
  if (ax < 0.25f) {
    const float x2 = mul(ax, ax);
    float p = 0.0218694885f;                // 62/2835
    p = add(mul(p, x2), -0.0539682540f);    // -17/315
    p = add(mul(p, x2), 0.133333333f);      // 2/15
    p = add(mul(p, x2), -0.333333333f);
    p = add(mul(p, x2), 1.0f);
    t = mul(ax, p);
  } else if (ax > 9.0f) {
    t = 1.0f;
  } else {
    t = sub(1.0f, div(2.0f, add(exp(mul(2.0f, ax)), 1.0f)));
  }
  return x < 0 ? -t : t;
}

SLUICE_HD float sigmoid(float x) { return div(1.0f, add(1.0f, exp(-x))); }
SLUICE_HD float silu(float x) { return mul(x, sigmoid(x)); }
// log(1 + e^x), = x above 20 (as transformers does).
SLUICE_HD float softplus(float x) { return x > 20.0f ? x : log1p(exp(x)); }
// SiTU(g, u) = [β_g·tanh(g/β_g)·σ(g)]·[β_u·tanh(u/β_u)].
SLUICE_HD float situ(float g, float u, float beta_g, float beta_u) {
  return mul(mul(mul(beta_g, tanh(div(g, beta_g))), sigmoid(g)), mul(beta_u, tanh(div(u, beta_u))));
}

}  // namespace sluice::mathf
