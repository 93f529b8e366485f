// mathf.h's exp, tanh, sigmoid, SiLU and SiTU, and the gated activations built on them, on the
// lanes of a SIMD vector, written once over a lane traits type S (simd_avx2.h: 8 lanes, simd_avx512.h:
// 16). Each lane goes through exactly the scalar function's IEEE operations in its order (every
// branch is computed and each lane's own is selected), so every lane has the scalar result's bits.
// Include only from *_avx2.cpp / *_avx512.cpp files, which are compiled for their ISA without
// contraction (CMakeLists.txt); their traits types have internal linkage, so these templates never
// leave a copy that another file's caller could get.
//
// S provides: V (float lanes), I (int32 lanes), M (a lane mask) and kLanes; set1, iset1, load,
// store, load_n / store_n (the first n lanes only), add, sub, mul, div, round (to nearest even), to_int (of integral lanes), iadd, isub,
// lt / gt / is_nan on V and igt on I (giving M), mor (M | M), none (no lane of M set), select(a, m, b) and iselect (b where
// m is set, else a), neg (the sign flipped), pow2 (2^k exactly for k in [-126, 127]).
#pragma once
#include <algorithm>
#include <cstdint>

#include "device/cpu/kernels.h"
#include "device/device.h"

// The loops over a small constant count of vectors unrolled, so their accumulators live in
// registers: GCC at -O2 keeps such an array in memory otherwise, and every add then waits on a
// store and a load (the tile scores and context sums ran far below their floor so:
// docs/BENCHMARKS.md, "Design measurements behind code comments").
#define SLUICE_UNROLL _Pragma("GCC unroll 16")

namespace sluice::device::simd {

// mathf::exp.
template <class S>
typename S::V exp(typename S::V x) {
  using V = typename S::V;
  using I = typename S::I;
  const V k = S::round(S::mul(x, S::set1(1.44269502f)));
  const V r = S::sub(S::sub(x, S::mul(k, S::set1(0.693145752f))), S::mul(k, S::set1(1.42860677e-06f)));
  V p = S::set1(2.48015873e-05f);
  SLUICE_UNROLL for (float c : {1.98412698e-04f, 1.38888889e-03f, 8.33333333e-03f, 4.16666667e-02f, 1.66666667e-01f, 0.5f, 1.0f,
                  1.0f})
    p = S::add(S::mul(p, r), S::set1(c));
  // k is an integer in [-150, 128] on every lane that keeps this result (others are replaced below):
  // p·2^k in one rounding, or beyond the normal exponents in two exact scalings.
  const I ki = S::to_int(k);
  const auto high = S::igt(ki, S::iset1(127)), low = S::igt(S::iset1(-126), ki);
  // Every lane's k a normal exponent (the common case): p·2^k is every lane's result, as below.
  // (x past either cut-off, ±inf and NaN all give k outside [-126, 127]: NaN and inf convert to
  // INT_MIN.)
  if (S::none(S::mor(high, low))) return S::mul(p, S::pow2(ki));
  I k1 = S::iselect(ki, high, S::iset1(127));
  k1 = S::iselect(k1, low, S::iadd(ki, S::iset1(100)));
  I k2 = S::iselect(S::iset1(0), high, S::isub(ki, S::iset1(127)));
  k2 = S::iselect(k2, low, S::iset1(-100));
  V y = S::mul(p, S::pow2(k1));
  y = S::select(y, S::mor(high, low), S::mul(y, S::pow2(k2)));
  y = S::select(y, S::lt(x, S::set1(-103.972084f)), S::set1(0.0f));
  y = S::select(y, S::gt(x, S::set1(88.7228394f)), S::set1(__builtin_inff()));
  return S::select(y, S::is_nan(x), x);
}

// mathf::tanh.
template <class S>
typename S::V tanh(typename S::V x) {
  using V = typename S::V;
  const auto negative = S::lt(x, S::set1(0.0f));
  const V ax = S::select(x, negative, S::neg(x));
  const V x2 = S::mul(ax, ax);
  V p = S::set1(0.0218694885f);
  SLUICE_UNROLL for (float c : {-0.0539682540f, 0.133333333f, -0.333333333f, 1.0f}) p = S::add(S::mul(p, x2), S::set1(c));
  const V series = S::mul(ax, p);
  const V e = exp<S>(S::mul(S::set1(2.0f), ax));
  V t = S::sub(S::set1(1.0f), S::div(S::set1(2.0f), S::add(e, S::set1(1.0f))));
  t = S::select(t, S::gt(ax, S::set1(9.0f)), S::set1(1.0f));
  t = S::select(t, S::lt(ax, S::set1(0.25f)), series);
  t = S::select(t, negative, S::neg(t));
  return S::select(t, S::is_nan(x), x);
}

// mathf::sigmoid, silu, situ.
template <class S>
typename S::V sigmoid(typename S::V x) {
  return S::div(S::set1(1.0f), S::add(S::set1(1.0f), exp<S>(S::neg(x))));
}
template <class S>
typename S::V silu(typename S::V x) {
  return S::mul(x, sigmoid<S>(x));
}
template <class S>
typename S::V situ(typename S::V g, typename S::V u, typename S::V beta_g, typename S::V beta_u) {
  const typename S::V tg = S::mul(beta_g, tanh<S>(S::div(g, beta_g)));
  const typename S::V tu = S::mul(beta_u, tanh<S>(S::div(u, beta_u)));
  return S::mul(S::mul(tg, sigmoid<S>(g)), tu);
}

// g[i] = f(g[i], u[i]) a vector at a time; the tail through a zero-padded vector.
template <class S, class F>
void each(float* g, const float* u, int64_t n, F f) {
  constexpr int64_t W = S::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(g + i, f(S::load(g + i), S::load(u + i)));
  if (i < n) {
    float gt[W] = {}, ut[W] = {};
    std::copy(g + i, g + n, gt);
    std::copy(u + i, u + n, ut);
    S::store(gt, f(S::load(gt), S::load(ut)));
    std::copy(gt, gt + (n - i), g + i);
  }
}

// unary_scalar's σ or SiLU (ops.cpp), a vector at a time, the tail through the first lanes.
template <class S>
void unary(Unary f, const float* x, float* y, int64_t n) {
  constexpr int64_t W = S::kLanes;
  auto one = [f](typename S::V v) { return f == Unary::Sigmoid ? sigmoid<S>(v) : silu<S>(v); };
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(y + i, one(S::load(x + i)));
  if (i < n) S::store_n(y + i, one(S::load_n(x + i, n - i)), n - i);
}

// The gated activations with gated_act_scalar's bits (ops.cpp).
template <class S>
void gated_act(const Activation& a, float* g, const float* u, int64_t n) {
  using V = typename S::V;
  switch (a.kind) {
    case ActKind::SiTU: {
      const V bg = S::set1(a.beta_gate), bu = S::set1(a.beta_up);
      each<S>(g, u, n, [&](V gv, V uv) { return situ<S>(gv, uv, bg, bu); });
      break;
    }
    case ActKind::SiLU:
      each<S>(g, u, n, [](V gv, V uv) { return S::mul(silu<S>(gv), uv); });
      break;
    case ActKind::ClampedSwiGLU: {
      // std::min(g, limit) and std::clamp(u, -limit, limit) as the scalar loop has them (a NaN g
      // stays NaN, a NaN u stays NaN), then (uc + 1)·(gc·σ(gc·α)).
      const V hi = S::set1(a.limit), lo = S::set1(-a.limit), alpha = S::set1(a.alpha);
      each<S>(g, u, n, [&](V gv, V uv) {
        const V gc = S::select(gv, S::lt(hi, gv), hi);
        V uc = S::select(uv, S::lt(hi, uv), hi);
        uc = S::select(uc, S::lt(uv, lo), lo);
        return S::mul(S::add(uc, S::set1(1.0f)), S::mul(gc, sigmoid<S>(S::mul(gc, alpha))));
      });
      break;
    }
  }
}

}  // namespace sluice::device::simd
