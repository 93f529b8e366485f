// CPU kernels behind the CPU device (device/cpu/cpu_device.h): the weight-matrix products in fp32
// with exact widening of bf16/f16, MXFP4, FP8 and INT4 weights, and the scalar element-wise helpers the
// op bodies are built from. A scalar reference implementation is the oracle; AVX2 and AVX-512
// products are chosen at run time (SLUICE_ISA=scalar|avx2|avx512 overrides). Every product keeps
// the batch-invariance contract of device/weight.h.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "device/weight.h"

namespace sluice::device {

struct Activation;  // device/device.h

// y[i*ldy + r] = sum_c W[r,c] * x[i*ldx + c] for i in [0,n), r in [r0,r1). fp32 accumulation.
using MatmulFn = void (*)(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy,
                          int64_t r0, int64_t r1);
// ctx[r·ldc + j] += Σ_{p0 <= p < p1} s[p·stride + r]·lat[p·kvr + j] for r < rows and j < kvr, each
// column's sum in order of p with every product rounded (the attention's contexts of `rows` query
// rows whose scores sit side by side): the same bits on every ISA and for any grouping of rows.
using ContextRowsFn = void (*)(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat,
                               int64_t kvr, int64_t p0, int64_t p1, int64_t rows);
// The absorbed attention's tiles of 16 query rows (cpu_attention.cpp). Scores of `count` <= 8
// positions: out[k·16 + r] = (Σ_{i<kvr} qT[i·16 + r]·lat[k·kvr + i] + Σ_{i<rope} qT[(kvr + i)·16 + r]·
// kpe[k·rope + i])·scale, each sum from 0 in order of i with every product rounded. Softmax of every
// row of a tile over scores stored position-major (sT[p·16 + r]), row r seeing n[r] positions,
// n[0] <= n[r] (ops.cpp's softmax per row). Both give the same bits on every ISA.
inline constexpr int64_t kAttnTile = 16, kTileScoresMax = 8;
using TileScoresFn = void (*)(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope,
                              int64_t count, float scale, float* out);
using TileSoftmaxFn = void (*)(float* sT, const int64_t* n);
// One delta-rule step of one KDA head (cpu_kda.cpp): S ← Diag(e^g)·S_in; δ = β(v − Sᵀk);
// S ← S + kδᵀ; o = Sᵀq (q null: no output). Every column's sums run over the key channels in order:
// the same bits on every ISA.
using DeltaStepFn = void (*)(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                             const float* v, const float* g, float beta, float* kv_mem, float* o);
// g[i] = act(g[i], u[i]) for i in [0, n): element by element, the same bits on every ISA.
using GatedActFn = void (*)(const Activation& a, float* g, const float* u, int64_t n);
// y[i] = f(x[i]) for i in [0, n) (y may be x): mathf's sigmoid or SiLU, element by element, the
// same bits on every ISA.
enum class Unary : uint8_t { Sigmoid, Silu };
using UnaryFn = void (*)(Unary f, const float* x, float* y, int64_t n);
// out[c] = W[r, c] for an FP8 weight: the e4m3 value times its block's scale, one rounding each
// (fp8_widen_row's bits), for the MLA attention's kv_b rows.
using WidenFp8Fn = void (*)(const Weight& w, int64_t r, float* out);

struct Isa {
  const char* name;
  MatmulFn matmul_f32;
  MatmulFn matmul_bf16;
  MatmulFn matmul_mxfp4;
  MatmulFn matmul_fp8;   // FP8 e4m3 with 128x128 F32 block scales
  MatmulFn matmul_int4;  // INT4_G32: packed int4 with BF16 scales per 32 columns
  GatedActFn gated_act;  // SiTU, SiLU·u, clamped SwiGLU (mathf.h's functions, lane by lane)
  TileScoresFn tile_scores;    // the absorbed attention's scores, a tile at a time
  TileSoftmaxFn tile_softmax;  // and their softmax
  ContextRowsFn context_rows;  // the absorbed attention's latent sums
  DeltaStepFn delta_step;      // KDA's recurrence
  UnaryFn unary;               // σ and SiLU of a row (KDA's conv and gates, the output gates)
  WidenFp8Fn widen_fp8;        // an FP8 row widened to fp32
  // The kernel set's own name where one ISA has two (AVX-512 with and without the VBMI kernels,
  // whose FP8 sums differ in order): "avx512-vbmi" and "avx512". Null: the ISA's name.
  const char* kernel_set = nullptr;
};
inline const char* kernel_set_name(const Isa& isa) { return isa.kernel_set ? isa.kernel_set : isa.name; }

const Isa& scalar_isa();
// A per-thread buffer of at least `floats` floats for a product's rearranged activations, reused by
// the thread's next call (grows, never shrinks: no allocation once the largest pass has run).
float* product_scratch(size_t floats);
// The FP8 products of the SIMD ISAs: the F16C decode (matmul_fp8_avx2.cpp, matmul_fp8_avx512.cpp),
// whose activations are scaled by 2^8 (exact; in product_scratch) and whose NaN codes decode by
// fp8_value_scaled (the e4m3 value times 2^-8), and the table decode of AVX-512 VBMI
// (matmul_fp8_vbmi.cpp), with its widening of one row (widen_fp8_vbmi: fp8_widen_row's values).
const float* fp8_scaled_activations(const float* x, int64_t ldx, int64_t n, int64_t cols);
float fp8_value_scaled(uint8_t code);
void matmul_fp8_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                     int64_t r1);
void matmul_fp8_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1);
void matmul_fp8_vbmi(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                     int64_t r1);
void widen_fp8_vbmi(const Weight& w, int64_t r, float* out);
// How the FP8 products' one-vector tiles prefetch the next tile's rows while they read their own:
// not at all, non-temporally, or into L2. Chosen once per process (fp8_next_tile_hint: the
// measured best of this CPU's vendor), or by SLUICE_FP8_PREFETCH=none|nta|t1 for measurements.
enum Fp8Prefetch : int { kFp8PrefetchNone = 0, kFp8PrefetchNta = 1, kFp8PrefetchT1 = 2 };
int fp8_next_tile_hint();
// The INT4_G32 products of the SIMD ISAs (matmul_int4_avx2.cpp, matmul_int4_avx512.cpp, and
// matmul_int4_vbmi.cpp with the same bits as the AVX-512 one).
void matmul_int4_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                      int64_t r1);
void matmul_int4_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                        int64_t r1);
void matmul_int4_vbmi(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                      int64_t r1);
// The gated activations: the scalar loop (ops.cpp) and its 8- and 16-lane forms (act_avx2.cpp,
// act_avx512.cpp).
void gated_act_scalar(const Activation& a, float* g, const float* u, int64_t n);
void gated_act_avx2(const Activation& a, float* g, const float* u, int64_t n);
void gated_act_avx512(const Activation& a, float* g, const float* u, int64_t n);
void unary_scalar(Unary f, const float* x, float* y, int64_t n);
void unary_avx2(Unary f, const float* x, float* y, int64_t n);
void unary_avx512(Unary f, const float* x, float* y, int64_t n);
// The tiles' scores and softmax, and the context sums: four lanes at a time in cpu_attention.cpp,
// eight in attention_avx2.cpp (scores, context sums), sixteen in attention_avx512.cpp.
void tile_scores_v4(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                    float scale, float* out);
void tile_scores_avx2(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                      float scale, float* out);
void context_rows_avx2(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr,
                         int64_t p0, int64_t p1, int64_t rows);
void tile_scores_avx512(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                        float scale, float* out);
void tile_softmax_v4(float* sT, const int64_t* n);
void tile_softmax_avx512(float* sT, const int64_t* n);
void context_rows_v4(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr,
                         int64_t p0, int64_t p1, int64_t rows);
void context_rows_avx512(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr,
                         int64_t p0, int64_t p1, int64_t rows);
// The delta step: the compiler's loops (cpu_kda.cpp), eight and sixteen columns at a time
// (kda_avx2.cpp, kda_avx512.cpp).
void delta_step_generic(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                        const float* v, const float* g, float beta, float* kv_mem, float* o);
void delta_step_avx2(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                     const float* v, const float* g, float beta, float* kv_mem, float* o);
void delta_step_avx512(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                       const float* v, const float* g, float beta, float* kv_mem, float* o);
const Isa* avx2_isa();    // nullptr when not compiled in or not supported by this CPU
// Likewise; on a CPU with AVX-512 VBMI its FP8 and INT4 products and FP8 widening are the VBMI
// ones (matmul_fp8_vbmi.cpp, matmul_int4_vbmi.cpp).
const Isa* avx512_isa();
// The AVX-512 table without the VBMI kernels, where the CPU has VBMI (so tests and benchmarks reach
// both forms on one machine); nullptr elsewhere (avx512_isa() is then that table).
const Isa* avx512_plain_isa();
// available_isas() and, where it exists, avx512_plain_isa(): every kernel set the tests check.
std::vector<const Isa*> isa_variants();
void widen_fp8_scalar(const Weight& w, int64_t r, float* out);
std::vector<const Isa*> available_isas();  // scalar first
const Isa& active_isa();                   // best available, or SLUICE_ISA's choice
void set_active_isa(std::string_view name);  // throws sluice::Error for an unknown/unsupported name

// Runs one product (plus the weight's bias, if any) on an ISA, rows split over the global thread
// pool. x: [n, w.cols] with row stride ldx, y: [n, w.rows] with row stride ldy.
void linear(const Isa& isa, const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy);
// Several products in one fork and join of the pool: item i is linear(isa, *w, x, ldx, n, y, ldy).
// The items' weight rows are laid end to end and split into one contiguous slice per thread (a
// product's bits are its own rows' and columns' alone, so the split changes none). For passes of a
// few rows through many small products (a decode step's experts), where one fork and join per
// product cost as much as the products.
struct LinearItem {
  const Weight* w;
  const float* x;
  int64_t ldx, n;
  float* y;
  int64_t ldy;
};
void linear_batch(const Isa& isa, std::span<const LinearItem> items);
// The same with the active ISA and contiguous rows.
void linear(const Weight& w, const float* x, int64_t n, float* y);
// Same, single-threaded, on a given ISA (tests and the thread pool's own workers use it).
void linear_on(const Isa& isa, const Weight& w, const float* x, int64_t n, float* y);

// ---- element-wise ops (fp32) ----
// out = w ⊙ x · rsqrt(mean(x²) + eps); w may be nullptr (weight 1). out may alias x.
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out);
// out = x · rsqrt(Σx² + eps). out may alias x.
void l2norm(const float* x, int64_t n, float eps, float* out);
float sigmoid(float x);
float silu(float x);
float softplus(float x);  // log(1+exp(x)), = x above 20 (as transformers does)
// SiTU(g,u) = [β_g·tanh(g/β_g)·σ(g)] · [β_u·tanh(u/β_u)]
float situ(float g, float u, float beta_g, float beta_u);
// In-place numerically stable softmax.
void softmax(float* x, int64_t n);
float dot(const float* a, const float* b, int64_t n);
// y += a·x
void axpy(float a, const float* x, float* y, int64_t n);


}  // namespace sluice::device
