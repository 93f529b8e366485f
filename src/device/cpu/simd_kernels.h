// The absorbed attention's tile scores and context sums and KDA's delta step, written once over the
// lane traits of simd_math.h (attention_avx2.cpp / kda_avx2.cpp instantiate them for 8 lanes,
// attention_avx512.cpp / kda_avx512.cpp for 16). Every lane is one row's or one column's sum over
// its index in order, each product rounded before its add, so the bits are the scalar loops'
// (cpu_attention.cpp, cpu_kda.cpp). Same rules as simd_math.h: include only from ISA files
// compiled without contraction, whose traits types have internal linkage.
#pragma once
#include <algorithm>
#include <cstdint>

#include "device/cpu/kernels.h"
#include "device/cpu/simd_math.h"

namespace sluice::device::simd {

// The first m <= kLanes floats: a plain load or store when the vector is whole.
template <class S>
typename S::V load_upto(const float* p, int64_t m) {
  return m == S::kLanes ? S::load(p) : S::load_n(p, m);
}
template <class S>
void store_upto(float* p, typename S::V v, int64_t m) {
  if (m == S::kLanes) S::store(p, v);
  else S::store_n(p, v, m);
}

// C positions' dot sums over the tile's 16 rows (R vectors): C·R independent sums hide the adds'
// latency, and each query vector is loaded once for all of them. sum[k][r] = Σ_{i<n} qT[i·16 + ·]·
// x[k·ldx + i] from 0 in order, each product rounded.
template <class S, int C, int R>
[[gnu::always_inline]] inline void tile_sums(const float* qT, const float* x, int64_t ldx, int64_t n,
                                             typename S::V (&acc)[C][R]) {
  SLUICE_UNROLL for (int k = 0; k < C; ++k)
    SLUICE_UNROLL for (int r = 0; r < R; ++r) acc[k][r] = S::set1(0.0f);
  for (int64_t i = 0; i < n; ++i) {
    typename S::V q[R];
    SLUICE_UNROLL for (int r = 0; r < R; ++r) q[r] = S::load(qT + i * kAttnTile + r * S::kLanes);
    SLUICE_UNROLL for (int k = 0; k < C; ++k) {
      const typename S::V xi = S::set1(x[k * ldx + i]);
      SLUICE_UNROLL for (int r = 0; r < R; ++r) acc[k][r] = S::add(acc[k][r], S::mul(q[r], xi));
    }
  }
}

// C positions' scores: the latent sums held in out while the rope sums run, then (a + b)·scale.
template <class S, int C>
void tile_scores_c(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, float scale,
                   float* out) {
  constexpr int R = int(kAttnTile / S::kLanes);
  typename S::V acc[C][R];
  tile_sums<S, C, R>(qT, lat, kvr, kvr, acc);
  SLUICE_UNROLL for (int k = 0; k < C; ++k)
    SLUICE_UNROLL for (int r = 0; r < R; ++r) S::store(out + k * kAttnTile + r * S::kLanes, acc[k][r]);
  tile_sums<S, C, R>(qT + kvr * kAttnTile, kpe, rope, rope, acc);
  const typename S::V s = S::set1(scale);
  SLUICE_UNROLL for (int k = 0; k < C; ++k)
    SLUICE_UNROLL for (int r = 0; r < R; ++r) {
      float* o = out + k * kAttnTile + r * S::kLanes;
      S::store(o, S::mul(S::add(S::load(o), acc[k][r]), s));
    }
}

// tile_scores_c for c <= C positions.
template <class S, int C>
void tile_scores_upto(int64_t c, const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope,
                      float scale, float* out) {
  if (c == C) return tile_scores_c<S, C>(qT, lat, kvr, kpe, rope, scale, out);
  if constexpr (C > 1) tile_scores_upto<S, C - 1>(c, qT, lat, kvr, kpe, rope, scale, out);
}

// TileScoresFn: eight sums in flight, as many positions per pass as that leaves.
template <class S>
void tile_scores(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                 float scale, float* out) {
  constexpr int P = int(kTileScoresMax / (kAttnTile / S::kLanes));
  for (int64_t k = 0; k < count; k += P)
    tile_scores_upto<S, P>(std::min<int64_t>(P, count - k), qT, lat + k * kvr, kvr, kpe + k * rope, rope, scale,
                           out + k * kAttnTile);
}

// RB rows' context sums: four vectors of columns of every row in registers across the positions,
// each latent vector loaded once for the RB rows; then one vector at a time, the last one partial.
template <class S, int RB>
void context_block(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0,
                   int64_t p1) {
  using V = typename S::V;
  constexpr int64_t W = S::kLanes;
  int64_t j = 0;
  for (; j + 4 * W <= kvr; j += 4 * W) {
    V c[RB][4];
    SLUICE_UNROLL for (int r = 0; r < RB; ++r)
      SLUICE_UNROLL for (int k = 0; k < 4; ++k) c[r][k] = S::load(ctx + r * ldc + j + W * k);
    for (int64_t p = p0; p < p1; ++p) {
      const float* l = lat + p * kvr + j;
      V lv[4];
      SLUICE_UNROLL for (int k = 0; k < 4; ++k) lv[k] = S::load(l + W * k);
      SLUICE_UNROLL for (int r = 0; r < RB; ++r) {
        const V w = S::set1(s[p * stride + r]);
        SLUICE_UNROLL for (int k = 0; k < 4; ++k) c[r][k] = S::add(c[r][k], S::mul(w, lv[k]));
      }
    }
    SLUICE_UNROLL for (int r = 0; r < RB; ++r)
      SLUICE_UNROLL for (int k = 0; k < 4; ++k) S::store(ctx + r * ldc + j + W * k, c[r][k]);
  }
  for (; j < kvr; j += W) {
    const int64_t m = std::min(W, kvr - j);
    SLUICE_UNROLL for (int r = 0; r < RB; ++r) {
      V c = load_upto<S>(ctx + r * ldc + j, m);
      for (int64_t p = p0; p < p1; ++p)
        c = S::add(c, S::mul(S::set1(s[p * stride + r]), load_upto<S>(lat + p * kvr + j, m)));
      store_upto<S>(ctx + r * ldc + j, c, m);
    }
  }
}

// ContextRowsFn: rows four at a time on 16 lanes (16 accumulators), two at a time on 8 (the 16
// ymm registers), the rest one at a time.
template <class S>
void context_rows(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0,
                  int64_t p1, int64_t rows) {
  constexpr int RB = S::kLanes >= 16 ? 4 : 2;
  int64_t r = 0;
  for (; r + RB <= rows; r += RB) context_block<S, RB>(ctx + r * ldc, ldc, s + r, stride, lat, kvr, p0, p1);
  for (; r < rows; ++r) context_block<S, 1>(ctx + r * ldc, ldc, s + r, stride, lat, kvr, p0, p1);
}

// DeltaStepFn, a vector of value columns at a time: each column's arithmetic is
// delta_step_generic's (cpu_kda.cpp) in its order: the decayed S[i][j] = S_in[i][j]·e^{g_i}, then
// Σ_i S[i][j]·k_i from 0 in order of i, δ_j = (v_j − that)·β, S[i][j] += k_i·δ_j, and o_j = Σ_i
// S[i][j]·q_i from 0; the phases of one column are fused (a column never reads another). The decays
// are mathf::exp's, a vector at a time.
template <class S>
void delta_step(const float* S_in, float* St, int64_t dk, int64_t dv, const float* q, const float* k, const float* v,
                const float* g, float beta, float* kv_mem, float* o) {
  using V = typename S::V;
  constexpr int64_t W = S::kLanes, kMaxKeys = 512;
  if (dk > kMaxKeys) return delta_step_generic(S_in, St, dk, dv, q, k, v, g, beta, kv_mem, o);
  alignas(64) float a[kMaxKeys];
  for (int64_t i = 0; i < dk; i += W) {
    const int64_t m = std::min(W, dk - i);
    store_upto<S>(a + i, exp<S>(load_upto<S>(g + i, m)), m);
  }
  const V b = S::set1(beta);
  for (int64_t j = 0; j < dv; j += W) {
    const int64_t m = std::min(W, dv - j);
    V kv = S::set1(0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const V row = S::mul(load_upto<S>(S_in + i * dv + j, m), S::set1(a[i]));
      store_upto<S>(St + i * dv + j, row, m);
      kv = S::add(kv, S::mul(row, S::set1(k[i])));
    }
    kv = S::mul(S::sub(load_upto<S>(v + j, m), kv), b);
    store_upto<S>(kv_mem + j, kv, m);
    V out = S::set1(0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* row = St + i * dv + j;
      const V updated = S::add(load_upto<S>(row, m), S::mul(S::set1(k[i]), kv));
      store_upto<S>(row, updated, m);
      if (q) out = S::add(out, S::mul(updated, S::set1(q[i])));
    }
    if (q) store_upto<S>(o + j, out, m);
  }
}

}  // namespace sluice::device::simd
