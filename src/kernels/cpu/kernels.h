// CPU kernels: the weight-matrix products and element-wise ops of the model, in fp32 with exact
// widening of bf16/f16 and MXFP4 weights. A scalar reference implementation is the oracle; AVX2
// and AVX-512 implementations are chosen at run time (SLUICE_ISA=scalar|avx2|avx512 overrides).
//
// Batch invariance (a contract every implementation keeps): the value written for output row r
// and input vector i depends only on W[r,:] and x[i,:], never on n, on the row range, or on the
// other vectors in the batch. Multi-position passes therefore equal token-by-token passes bit
// for bit, which is what makes drafting on/off give identical tokens.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace sluice::kernels {

enum class WeightType : uint8_t { F32, BF16, MXFP4 };

// A [rows, cols] weight stored row-major as in PyTorch ([out, in]).
struct Weight {
  WeightType type = WeightType::F32;
  int64_t rows = 0, cols = 0;
  const void* data = nullptr;      // F32: float[rows*cols]; BF16: uint16_t[rows*cols]; MXFP4: uint8_t[rows*cols/2]
  const uint8_t* scales = nullptr;  // MXFP4 only: E8M0 bytes [rows, cols/32]
};

// y[i*ldy + r] = sum_c W[r,c] * x[i*ldx + c] for i in [0,n), r in [r0,r1). fp32 accumulation.
using MatmulFn = void (*)(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy,
                          int64_t r0, int64_t r1);

struct Isa {
  const char* name;
  MatmulFn matmul_f32;
  MatmulFn matmul_bf16;
  MatmulFn matmul_mxfp4;
};

const Isa& scalar_isa();
const Isa* avx2_isa();    // nullptr when not compiled in or not supported by this CPU
const Isa* avx512_isa();  // likewise
std::vector<const Isa*> available_isas();  // scalar first
const Isa& active_isa();                   // best available, or SLUICE_ISA's choice
void set_active_isa(std::string_view name);  // throws sluice::Error for an unknown/unsupported name

// Runs one product with the active ISA, rows split over the global thread pool.
// x: [n, w.cols] contiguous, y: [n, w.rows] contiguous.
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

// Causal depthwise convolution with kernel K over T new positions for C channels, then SiLU.
// state: [C, K-1] previous raw inputs (oldest first), updated in place to end at the last position.
// x: [T, C] raw inputs; w: [C, K] (oldest tap first); out: [T, C].
void causal_conv_silu(float* state, const float* x, const float* w, int64_t T, int64_t C, int64_t K, float* out);

}  // namespace sluice::kernels
