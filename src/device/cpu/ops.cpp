// Element-wise ops in fp32 (reference versions; they are a small share of run time). The
// transcendentals are mathf.h's, the same on every device.
#include <algorithm>
#include <cmath>

#include "device/cpu/kernels.h"
#include "device/device.h"
#include "device/mathf.h"

namespace sluice::device {

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  float inv = 1.0f / std::sqrt(ss / float(n) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

void l2norm(const float* x, int64_t n, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  float inv = 1.0f / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

float sigmoid(float x) { return mathf::sigmoid(x); }
float silu(float x) { return mathf::silu(x); }
float softplus(float x) { return mathf::softplus(x); }
float situ(float g, float u, float beta_g, float beta_u) { return mathf::situ(g, u, beta_g, beta_u); }

void unary_scalar(Unary f, const float* x, float* y, int64_t n) {
  if (f == Unary::Sigmoid)
    for (int64_t i = 0; i < n; ++i) y[i] = sigmoid(x[i]);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}

void gated_act_scalar(const Activation& a, float* g, const float* u, int64_t n) {
  switch (a.kind) {
    case ActKind::SiTU:
      for (int64_t i = 0; i < n; ++i) g[i] = situ(g[i], u[i], a.beta_gate, a.beta_up);
      break;
    case ActKind::SiLU:
      for (int64_t i = 0; i < n; ++i) g[i] = silu(g[i]) * u[i];
      break;
    case ActKind::ClampedSwiGLU:
      for (int64_t i = 0; i < n; ++i) {
        const float gc = std::min(g[i], a.limit), uc = std::clamp(u[i], -a.limit, a.limit);
        g[i] = (uc + 1.0f) * (gc * sigmoid(gc * a.alpha));
      }
      break;
  }
}

void softmax(float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = mathf::exp(x[i] - m);
    s += x[i];
  }
  float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace sluice::device
