// The fast CUDA products on tensor cores (the `cuda` ISA, every weight format but F32, every
// number of input rows). One order for every N: decode (N = 1), verify passes (N = 2…16) and
// prefill (N in the thousands) run the same instruction chain per output, so a row gets the same
// bits whatever pass it is in (batch invariance, drafting on == off, any prefill chunking).
//
// Exactness. The activations are split exactly into three bf16 pieces (x = hi + mid + lo: 8 + 8 + 8
// significand bits, each piece the truncation of what is left), the weights are widened exactly to
// bf16 (every BF16, MXFP4 with its 2^e, FP8 e4m3 and INT4 bf16(q·s) value is a bf16), and
// mma.sync m16n8k16 multiplies bf16 pairs exactly and accumulates in fp32. What differs from the
// scalar oracle is only the order and rounding of the sums, inside the sum-order bound the tests
// check (the tensor core adds a k16 group's products before rounding; the result lies within the
// bound of a fp32 sum in some order).
//
// Layout. An mma's A operand is 16 weight rows x 16 columns, B is 16 columns x 8 input rows, D is
// 16 weight rows x 8 input rows (fp32). The columns of a 16-column slice are permuted the same way
// in A and B, which leaves the sum unchanged: each lane's register pair holds columns (m, m + 4) of
// an 8-column group, the pairing that a 32-bit word of nibbles decodes to with one shift. The four
// lanes that share a weight row each take U 16-byte loads of it per step, interleaved so that the
// four read 64·U contiguous bytes of the row (Fmt: BF16 8 x 8 columns, MXFP4 and INT4 1 x 32 (one
// scale block per load), FP8 2 x 16): a step is 256 columns of BF16 and 128 of the others (FP8: one
// scale block). The activations are split once per pass (split_pieces) into a [rows, Kp/8, 3]
// array of 16-byte groups in that pair order (Kp: the columns rounded up to 256, zero beyond).
//
// Order. A weight's steps are cut into KS contiguous ranges (KS: a function of the weight's format
// and width only); warp k of a block runs range k as one mma chain (per step: each 8-column group,
// its two k16 halves, each with the pieces hi, mid, lo, in that order; FP8: a fresh chain per
// 128-column step, added into the sum times the block's scale), and the KS partial sums are added
// in range order. Neither the number of input rows, nor the tile a row falls in, nor the grid
// changes this.
#include <cstdint>

#include "device/cuda/act.cuh"
#include "device/cuda/cuda_ops.h"
#include "device/cuda/products.cuh"

namespace sluice::device::cuda {
namespace {

constexpr int kMaxSplit = 8;    // warps per block: the K ranges of one tile
// The tile shape, fixed at build time (-D to measure another; docs/BENCHMARKS.md, fifteenth stop,
// has the shapes measured): MT m16 tiles of weight rows per warp, U_BF16 and U_NIB the loads per
// lane per row per step of BF16 and of MXFP4 / INT4 weights. One 16-row tile and one load for the
// 4-bit formats gave MXFP4 20 % and INT4 6 % more at N = 1 than two of each, for 8-24 % less at
// N = 8 and in prefill; the N = 1 passes decide decode.
#ifndef SLUICE_MMA_MT
#define SLUICE_MMA_MT 1
#endif
#ifndef SLUICE_MMA_U_BF16
#define SLUICE_MMA_U_BF16 8
#endif
#ifndef SLUICE_MMA_U_NIB
#define SLUICE_MMA_U_NIB 1
#endif
constexpr int MT = SLUICE_MMA_MT;       // m16 tiles of weight rows per warp
constexpr int kTileRows = 16 * MT;      // weight rows per block
constexpr int64_t kPieceCols = 256;  // the activations' columns are padded to a multiple of a step

__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Per format: PL columns per 16-byte load, U loads per lane per weight row per step. Load u of lane
// t (of the four that share a row) covers columns c0 + 4·PL·u + PL·t .. + PL - 1 of the step at
// c0, so the four lanes read 64·U contiguous bytes of each row per step; a step is 4·PL·U columns
// (FP8: one 128-column scale block).
template <WeightType T>
struct Fmt;
template <>
struct Fmt<WeightType::BF16> {
  static constexpr int PL = 8, U = SLUICE_MMA_U_BF16;
};
template <>
struct Fmt<WeightType::MXFP4> {
  static constexpr int PL = 32, U = SLUICE_MMA_U_NIB;
};
template <>
struct Fmt<WeightType::INT4_G32> {
  static constexpr int PL = 32, U = SLUICE_MMA_U_NIB;
};
template <>
struct Fmt<WeightType::FP8_E4M3> {
  static constexpr int PL = 16, U = 2;
};
template <WeightType T>
__host__ __device__ constexpr int step_cols() { return 4 * Fmt<T>::PL * Fmt<T>::U; }

static_assert(kPieceCols % step_cols<WeightType::BF16>() == 0 && kPieceCols % step_cols<WeightType::MXFP4>() == 0 &&
                  kPieceCols % step_cols<WeightType::FP8_E4M3>() == 0,
              "the activations' padding must cover every step");
static_assert(step_cols<WeightType::FP8_E4M3>() == kFp8Block, "an FP8 step is one scale block");

// One lane's loads of one weight row for one step.
template <WeightType T>
struct Slice {
  uint4 q[Fmt<T>::U];
  uint32_t scale[Fmt<T>::U];  // MXFP4: the E8M0 byte; INT4: the bf16 scale (each load is one block)
};

// Load u at column c (c < cols, or zeros: cols is a multiple of PL).
template <WeightType T>
__device__ __forceinline__ void load_one(const Weight& w, int64_t row, int64_t c, uint4& q, uint32_t& scale) {
  if (c >= w.cols) {
    // Zero weights: MXFP4 code 0, INT4 code 8 (q = 0) with scale 0, FP8 and BF16 zero bytes.
    q = T == WeightType::INT4_G32 ? make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u) : make_uint4(0, 0, 0, 0);
    scale = 0;
    return;
  }
  if constexpr (T == WeightType::BF16) {
    q = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) + row * w.cols + c);
  } else if constexpr (T == WeightType::FP8_E4M3) {
    q = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + row * w.cols + c);
  } else {
    q = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + row * (w.cols / 2) + c / 2);
    if constexpr (T == WeightType::MXFP4) scale = static_cast<const uint8_t*>(w.scales)[row * (w.cols / 32) + c / 32];
    else scale = static_cast<const uint16_t*>(w.scales)[row * (w.cols / kInt4Group) + c / kInt4Group];
  }
}

template <WeightType T>
__device__ __forceinline__ void load_slice(const Weight& w, int64_t row, int64_t c0, int t, Slice<T>& s) {
  constexpr int PL = Fmt<T>::PL;
#pragma unroll
  for (int u = 0; u < Fmt<T>::U; ++u) load_one<T>(w, row, c0 + 4 * PL * u + PL * t, s.q[u], s.scale[u]);
}

// The bf16 pairs (columns (m, m + 4), m = 0..3) of 8-column group j of one load (q, its scale).
template <WeightType T>
__device__ __forceinline__ void widen(const uint4& q, uint32_t scale, int j, uint32_t (&p)[4]) {
  if constexpr (T == WeightType::BF16) {
    p[0] = __byte_perm(q.x, q.z, 0x5410);
    p[1] = __byte_perm(q.x, q.z, 0x7632);
    p[2] = __byte_perm(q.y, q.w, 0x5410);
    p[3] = __byte_perm(q.y, q.w, 0x7632);
  } else if constexpr (T == WeightType::MXFP4) {
    // E2M1 s·e1e0·m placed as a bf16 with the exponent field e and the top mantissa bit m: e ≥ 1
    // gives 2^(e-127)·(1 + m/2), e = 0 the subnormal m·2^-127, both the code's value times 2^-126,
    // so one exact multiply by 2^(s-1) gives the weight for scales up to 2^1 (every real
    // checkpoint's); larger ones take two, by 2^126 and by the scale byte as the oracle widens it
    // (e8m0_to_f32: 0 gives 0, 255 infinity; the loader refuses both), the bf16 with that exponent.
    const uint32_t word = word_of(q, j);
    uint32_t v[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t t = word >> (4 * m);
      v[m] = ((t & 0x00070007u) << 6) | ((t & 0x00080008u) << 12);
    }
    if (scale - 1 < 128) {
      const uint32_t f = (scale + 126) << 7, f2 = f | (f << 16);
#pragma unroll
      for (int m = 0; m < 4; ++m) p[m] = bf16x2_fma(v[m], f2, 0x80008000u);
    } else {
      const uint32_t s2 = (scale << 7) | (scale << 23);
#pragma unroll
      for (int m = 0; m < 4; ++m) p[m] = bf16x2_fma(bf16x2_fma(v[m], 0x7e807e80u, 0x80008000u), s2, 0x80008000u);
    }
  } else if constexpr (T == WeightType::INT4_G32) {
    const uint32_t s2 = scale | (scale << 16);
    const uint32_t word = word_of(q, j);
#pragma unroll
    for (int m = 0; m < 4; ++m) p[m] = int4_pair(word, m, s2);
  } else {  // FP8 e4m3: group j is bytes 8j..8j+7 of the load
    const uint32_t w0 = word_of(q, 2 * j), w1 = word_of(q, 2 * j + 1);
    // s·eeee·mmm placed as a bf16 with the exponent field eeee and mantissa mmm0000: the value
    // times 2^-120 (e = 0: the subnormal m·2^-129), so one exact multiply by 2^120 gives it.
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t t = __byte_perm(w0, w1, uint32_t(m | (m << 4) | ((4 + m) << 8) | ((4 + m) << 12)));
      const uint32_t v = ((t & 0x007f007fu) << 4) | ((t & 0x00800080u) << 8);
      p[m] = bf16x2_fma(v, 0x7b807b80u, 0x80008000u);
    }
    // NaN codes (0x7f, 0xff; never in a valid checkpoint) widen to NaN, as in the scalar kernel.
    if ((((w0 & 0x7f7f7f7fu) + 0x01010101u) | ((w1 & 0x7f7f7f7fu) + 0x01010101u)) & 0x80808080u) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        if (((w0 >> (8 * m)) & 0x7f) == 0x7f) p[m] = (p[m] & 0xffff0000u) | 0x7fc0u;
        if (((w1 >> (8 * m)) & 0x7f) == 0x7f) p[m] = (p[m] & 0x0000ffffu) | 0x7fc00000u;
      }
    }
  }
}

// K ranges: a function of the weight's format and width only.
__host__ __device__ inline int64_t steps_of(WeightType t, int64_t cols) {
  const int64_t sc = t == WeightType::BF16       ? step_cols<WeightType::BF16>()
                     : t == WeightType::FP8_E4M3 ? step_cols<WeightType::FP8_E4M3>()
                                                 : step_cols<WeightType::MXFP4>();
  return (cols + sc - 1) / sc;
}
__host__ __device__ inline int split_of(WeightType t, int64_t cols) {
  const int64_t steps = steps_of(t, cols);
  int ks = 1;
  while (ks < kMaxSplit && steps / (2 * ks) >= 3) ks *= 2;
  return ks;
}

// acc[i][n] += the products of this warp's K range for weight rows r0 + 16i + (g, g + 8) and input
// rows 8n + (2t, 2t + 1) of xp (row stride xs uint4, nv rows valid). Rows past the weight's end
// repeat its last row (the caller does not write them).
template <WeightType T, int NX, bool Pipe = false>
__device__ __forceinline__ void warp_product(const Weight& w, int64_t r0, const uint4* xp, int64_t xs, int nv, int ks,
                                             int KS, float (&acc)[MT][NX][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  int64_t rows[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * i + g + 8 * h;
      rows[i][h] = r < w.rows ? r : w.rows - 1;
    }
  const int64_t S = steps_of(T, w.cols);
  const int64_t s0 = ks * S / KS, s1 = (ks + 1) * S / KS;
  constexpr int SC = step_cols<T>(), PL = Fmt<T>::PL, U = Fmt<T>::U, G = PL / 8;
  const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
  auto load_step = [&](int64_t s, Slice<T> (&sl)[MT][2]) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) load_slice<T>(w, rows[i][h], s * SC, t, sl[i][h]);
  };
  // Pipe: step s + 1's loads are issued before step s's products, so that they are in flight while
  // the tensor cores work (linear_mma's one-row BF16 and FP8 passes). The arithmetic is the same.
  constexpr bool kPipe = Pipe;
  Slice<T> cur[MT][2];
  if (kPipe && s0 < s1) load_step(s0, cur);
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t c0 = s * SC;
    Slice<T> nxt[MT][2];
    if (kPipe && s + 1 < s1) load_step(s + 1, nxt);
    if (!kPipe) load_step(s, cur);
    float part[MT][NX][4];
    float (&d)[MT][NX][4] = T == WeightType::FP8_E4M3 ? part : acc;
    if constexpr (T == WeightType::FP8_E4M3) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NX; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[i][n][e] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < G; ++j) {
        uint32_t a[MT][2][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) widen<T>(cur[i][h].q[u], cur[i][h].scale[u], j, a[i][h]);
        const int64_t group = (c0 + 4 * PL * u + PL * t) / 8 + j;
#pragma unroll
        for (int n = 0; n < NX; ++n) {
          // The input pieces of this group: input row 8n + g (B's column), hi, mid, lo.
          uint4 x[3];
          const bool live = 8 * n + g < nv;
          const uint4* src = xp + (8 * n + g) * xs + group * 3;
#pragma unroll
          for (int p = 0; p < 3; ++p) x[p] = live ? src[p] : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int i = 0; i < MT; ++i) {
#pragma unroll
            for (int p = 0; p < 3; ++p) mma(d[i][n], a[i][0][0], a[i][1][0], a[i][0][1], a[i][1][1], x[p].x, x[p].y);
#pragma unroll
            for (int p = 0; p < 3; ++p) mma(d[i][n], a[i][0][2], a[i][1][2], a[i][0][3], a[i][1][3], x[p].z, x[p].w);
          }
        }
      }
    if constexpr (T == WeightType::FP8_E4M3) {
      const float* sc = static_cast<const float*>(w.scales) + c0 / kFp8Block;
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const float scale = sc[(rows[i][0] / kFp8Block) * cb];
#pragma unroll
        for (int n = 0; n < NX; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][n][e] = fmaf(part[i][n][e], scale, acc[i][n][e]);
      }
    }
    if constexpr (kPipe) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) cur[i][h] = nxt[i][h];
    }
  }
}

// The KS warps' partial sums of a block, added in range order: red holds KS x (MT·NX·4) x 32
// floats. Every warp returns the total of its lane's elements.
template <int NX>
__device__ __forceinline__ void combine(float (&acc)[MT][NX][4], int ks, int KS, float* red) {
  constexpr int E = MT * NX * 4;
  const int lane = threadIdx.x & 31;
  if (KS == 1) return;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NX; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[(ks * E + (i * NX + n) * 4 + e) * 32 + lane] = acc[i][n][e];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NX; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = (i * NX + n) * 4 + e;
        float s = red[k * 32 + lane];
        for (int q = 1; q < KS; ++q) s += red[(q * E + k) * 32 + lane];
        acc[i][n][e] = s;
      }
}

// Output element e of D tile (i, n) of this lane: weight row and input row within the block's tile.
__device__ __forceinline__ int out_row(int i, int e) { return 16 * i + ((threadIdx.x & 31) >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int out_input(int n, int e) { return 8 * n + 2 * (threadIdx.x & 3) + (e & 1); }

// f(r, v, i, n, e) for each of this lane's outputs inside the weight's rows and the nv input rows:
// r the weight row, v the input row within the block's tile, [i][n][e] its place in the sums.
template <int NX, class F>
__device__ __forceinline__ void each_output(int64_t r0, int64_t rows, int nv, F&& f) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NX; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t r = r0 + out_row(i, e);
        const int v = out_input(n, e);
        if (r >= rows || v >= nv) continue;
        f(r, v, i, n, e);
      }
}

// y[v0 + v, r] = W[r, :]·x[v0 + v, :] (+ bias[r]); block: KS warps on kTileRows weight rows and
// 8·NX input rows.
template <WeightType T, int NX, bool Pipe = false>
__global__ void __launch_bounds__(kMaxSplit * 32) mma_gemv(Weight w, const uint4* xp, int64_t xs, int64_t n_in, Mat y,
                                                           int KS) {
  __shared__ float red[kMaxSplit * MT * NX * 4 * 32];
  const int ks = threadIdx.x >> 5;
  const int64_t r0 = int64_t(blockIdx.x) * kTileRows, v0 = int64_t(blockIdx.y) * 8 * NX;
  const int nv = int(n_in - v0 < 8 * NX ? n_in - v0 : 8 * NX);
  float acc[MT][NX][4] = {};
  warp_product<T, NX, Pipe>(w, r0, xp + v0 * xs, xs, nv, ks, KS, acc);
  combine<NX>(acc, ks, KS, red);
  if (ks != 0) return;
  each_output<NX>(r0, w.rows, nv, [&](int64_t r, int v, int i, int n, int e) {
    float s = acc[i][n][e];
    if (w.bias) s += load_bias(w, r);
    y.p[(v0 + v) * y.ld + r] = s;
  });
}

// Grouped experts, step 1: h[m, r] = act(gate[r, :]·g[m, :] + bg[r], up[r, :]·g[m, :] + bu[r]) for
// the member rows m of expert blockIdx.y (gp: the pieces of the gathered rows).
template <WeightType T, int NX>
__global__ void __launch_bounds__(kMaxSplit * 32) mma_gate_up(const ExpertGroupEntry* table, Activation act,
                                                              const uint4* gp, int64_t xs, float* h, int64_t I, int KS) {
  __shared__ float red[kMaxSplit * MT * NX * 4 * 32];
  const ExpertGroupEntry& ent = table[blockIdx.y];
  const int ks = threadIdx.x >> 5;
  const int64_t r0 = int64_t(blockIdx.x) * kTileRows, v0 = int64_t(blockIdx.z) * 8 * NX;
  if (v0 >= ent.n) return;  // the whole block leaves together
  const int nv = int(ent.n - v0 < 8 * NX ? ent.n - v0 : 8 * NX);
  const uint4* x = gp + (ent.off + v0) * xs;
  float ag[MT][NX][4] = {}, au[MT][NX][4] = {};
  warp_product<T, NX>(ent.gate, r0, x, xs, nv, ks, KS, ag);
  warp_product<T, NX>(ent.up, r0, x, xs, nv, ks, KS, au);
  combine<NX>(ag, ks, KS, red);
  __syncthreads();
  combine<NX>(au, ks, KS, red);
  if (ks != 0) return;
  each_output<NX>(r0, I, nv, [&](int64_t r, int v, int i, int n, int e) {
    float gv = ag[i][n][e], uv = au[i][n][e];
    if (ent.gate.bias) gv += load_bias(ent.gate, r);
    if (ent.up.bias) uv += load_bias(ent.up, r);
    h[(ent.off + v0 + v) * I + r] = gated_value(act, gv, uv);
  });
}

// Grouped experts, step 2: yexp[members[m], r] = down[r, :]·h[m, :] + bd[r] (hp: h's pieces).
template <WeightType T, int NX>
__global__ void __launch_bounds__(kMaxSplit * 32) mma_down(const ExpertGroupEntry* table, const uint4* hp, int64_t xs,
                                                           const int64_t* members, Mat yexp, int KS) {
  __shared__ float red[kMaxSplit * MT * NX * 4 * 32];
  const ExpertGroupEntry& ent = table[blockIdx.y];
  const int ks = threadIdx.x >> 5;
  const int64_t R = yexp.cols;
  const int64_t r0 = int64_t(blockIdx.x) * kTileRows, v0 = int64_t(blockIdx.z) * 8 * NX;
  if (v0 >= ent.n) return;
  const int nv = int(ent.n - v0 < 8 * NX ? ent.n - v0 : 8 * NX);
  float acc[MT][NX][4] = {};
  warp_product<T, NX>(ent.down, r0, hp + (ent.off + v0) * xs, xs, nv, ks, KS, acc);
  combine<NX>(acc, ks, KS, red);
  if (ks != 0) return;
  each_output<NX>(r0, R, nv, [&](int64_t r, int v, int i, int n, int e) {
    float s = acc[i][n][e];
    if (ent.down.bias) s += load_bias(ent.down, r);
    yexp.p[members[ent.off + v0 + v] * yexp.ld + r] = s;
  });
}

// pieces[r, j] = three 16-byte groups (hi, mid, lo) of columns 8j..8j+7 of x row r, each as bf16
// pairs (m, m + 4); columns past x's end are zero.
__global__ void split_kernel(Mat x, int64_t groups, uint4* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * groups) return;
  const int64_t r = i / groups, j = i % groups, c = j * 8;
  float v[8] = {};
  if (c < x.cols) {
    const float4 a = *reinterpret_cast<const float4*>(x.p + r * x.ld + c);
    const float4 b = *reinterpret_cast<const float4*>(x.p + r * x.ld + c + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
  uint32_t piece[3][8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    // Each piece the truncation of what is left (exact: fp32 subtraction of a leading part).
    float rest = v[k];
#pragma unroll
    for (int p = 0; p < 3; ++p) {
      piece[p][k] = __float_as_uint(rest) & 0xffff0000u;
      rest = rest - __uint_as_float(piece[p][k]);
    }
  }
  uint4* o = out + i * 3;
#pragma unroll
  for (int p = 0; p < 3; ++p)
    o[p] = make_uint4((piece[p][0] >> 16) | piece[p][4], (piece[p][1] >> 16) | piece[p][5],
                      (piece[p][2] >> 16) | piece[p][6], (piece[p][3] >> 16) | piece[p][7]);
}

// The kernels' template arguments for (type, input rows): NX n8 tiles of input rows per block (1
// for decode, 2 for verify passes; 8 for a prefill's BF16 products when `Wide`, which then read
// their weights once per 64 input rows instead of once per 16: the other formats' decode of four
// rows' loads, and the grouped experts' gate and up, would not fit the registers at 8).
template <bool Wide, class F>
void dispatch(WeightType type, int64_t rows, F&& f) {
  const auto go = [&](auto t) {
    if (rows <= 8) f(t, std::integral_constant<int, 1>{});
    else if constexpr (!Wide || decltype(t)::value != WeightType::BF16) f(t, std::integral_constant<int, 2>{});
    else if (rows <= 16) f(t, std::integral_constant<int, 2>{});
    else f(t, std::integral_constant<int, 8>{});
  };
  switch (type) {
    case WeightType::BF16: go(std::integral_constant<WeightType, WeightType::BF16>{}); break;
    case WeightType::MXFP4: go(std::integral_constant<WeightType, WeightType::MXFP4>{}); break;
    case WeightType::FP8_E4M3: go(std::integral_constant<WeightType, WeightType::FP8_E4M3>{}); break;
    case WeightType::INT4_G32: go(std::integral_constant<WeightType, WeightType::INT4_G32>{}); break;
    case WeightType::F32: fail("mma products: F32 weights take the FFMA kernels");
  }
}

int64_t piece_groups(int64_t cols) { return (cols + kPieceCols - 1) / kPieceCols * kPieceCols / 8; }

}  // namespace

size_t pieces_bytes(int64_t rows, int64_t cols) { return size_t(rows) * size_t(piece_groups(cols)) * 48; }

void split_pieces(cudaStream_t s, Mat x, void* pieces) {
  const int64_t groups = piece_groups(x.cols), n = x.rows * groups;
  if (n == 0) return;
  split_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, groups, static_cast<uint4*>(pieces));
  check_launch("split_pieces");
}

void linear_mma(cudaStream_t s, const Weight& w, const void* pieces, int64_t n_in, Mat y) {
  if (n_in == 0 || w.rows == 0) return;
  const int KS = split_of(w.type, w.cols);
  const int64_t xs = piece_groups(w.cols) * 3;
  dispatch<true>(w.type, n_in, [&](auto t, auto nx) {
    constexpr int NX = decltype(nx)::value;
    constexpr WeightType T = decltype(t)::value;
    const dim3 grid(unsigned((w.rows + kTileRows - 1) / kTileRows), unsigned((n_in + 8 * NX - 1) / (8 * NX)));
    // One input row of BF16 or FP8 weights: the loads of the next step in flight during this one's
    // products (warp_product's Pipe). On an H100, BF16 went from 0.67 to 0.73 of the copy floor and
    // FP8 from 0.56 to 0.58; MXFP4 and INT4 lost 4-11 % and 8-row passes 2-20 %, so they keep the
    // plain loop (docs/BENCHMARKS.md, sixteenth stop).
    if constexpr (NX == 1 && (T == WeightType::BF16 || T == WeightType::FP8_E4M3)) {
      if (n_in == 1) {
        mma_gemv<T, 1, true><<<grid, KS * 32, 0, s>>>(w, static_cast<const uint4*>(pieces), xs, n_in, y, KS);
        return;
      }
    }
    mma_gemv<T, NX><<<grid, KS * 32, 0, s>>>(w, static_cast<const uint4*>(pieces), xs, n_in, y, KS);
  });
  check_launch("linear_mma");
}

void experts_mma(cudaStream_t s, const Activation& act, WeightType type, const ExpertGroupEntry* table, int experts,
                 int64_t max_rows, int64_t R, int64_t I, const void* g_pieces, float* h, void* h_pieces,
                 int64_t total_rows, const int64_t* members, Mat yexp) {
  if (experts == 0 || max_rows == 0) return;
  const int KSg = split_of(type, R), KSd = split_of(type, I);
  dispatch<false>(type, max_rows, [&](auto t, auto nx) {
    constexpr WeightType T = decltype(t)::value;
    constexpr int NX = decltype(nx)::value;
    const unsigned tiles = unsigned((max_rows + 8 * NX - 1) / (8 * NX));
    mma_gate_up<T, NX><<<dim3(unsigned((I + kTileRows - 1) / kTileRows), unsigned(experts), tiles), KSg * 32, 0, s>>>(
        table, act, static_cast<const uint4*>(g_pieces), piece_groups(R) * 3, h, I, KSg);
    check_launch("experts_mma gate_up");
    split_pieces(s, Mat{h, total_rows, I, I}, h_pieces);
    mma_down<T, NX><<<dim3(unsigned((R + kTileRows - 1) / kTileRows), unsigned(experts), tiles), KSd * 32, 0, s>>>(
        table, static_cast<const uint4*>(h_pieces), piece_groups(I) * 3, members, yexp, KSd);
  });
  check_launch("experts_mma down");
}

}  // namespace sluice::device::cuda
