// Mixture of experts: sigmoid router with correction bias (grouped top-k as transformers does
// it), renormalised weights × routed_scaling_factor, the routed experts of the union of all rows
// (each requested once per pass from the ExpertProvider and run over every row routed to it),
// accumulated per row in route order so results do not depend on which rows share a pass;
// K3's latent projection around the experts; the shared experts; the dense MLP.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "model/layers.h"

namespace sluice::model {

void gated_activation(const KimiConfig& c, const float* g, const float* u, int64_t n, float* out) {
  if (c.activation == format::Activation::SiTU) {
    for (int64_t i = 0; i < n; ++i) out[i] = kernels::situ(g[i], u[i], c.situ_beta_gate, c.situ_beta_up);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = kernels::silu(g[i]) * u[i];
  }
}

namespace {

// down(act(gate·x, up·x)) for T rows; act(g, u, n) overwrites g.
template <typename Act>
void gated_mlp(const MlpWeights& w, const float* x, int64_t T, MlpScratch& s, float* out, Act act) {
  const int64_t I = w.gate.rows;
  float* g = s.g.resize(size_t(T * I));
  float* u = s.u.resize(size_t(T * I));
  kernels::linear(w.gate, x, T, g);
  kernels::linear(w.up, x, T, u);
  act(g, u, T * I);
  kernels::linear(w.down, g, T, out);
}

}  // namespace

void mlp_forward(const KimiConfig& c, const MlpWeights& w, const float* x, int64_t T, MlpScratch& s, float* out) {
  gated_mlp(w, x, T, s, out, [&](float* g, const float* u, int64_t n) { gated_activation(c, g, u, n, g); });
}

void swiglu_forward(const MlpWeights& w, const float* x, int64_t T, MlpScratch& s, float* out) {
  gated_mlp(w, x, T, s, out, [](float* g, const float* u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) g[i] = kernels::silu(g[i]) * u[i];
  });
}

void moe_route(const KimiConfig& c, const MoeWeights& w, const float* x, int64_t T, MoeScratch& s) {
  const int64_t E = c.num_experts, k = c.experts_per_token;
  const int64_t groups = c.num_expert_group, per_group = E / groups;
  float* logits = s.logits.resize(size_t(T * E));
  kernels::linear(w.router, x, T, logits);
  s.route.resize(size_t(T * k));
  s.weight.resize(size_t(T * k));
  std::vector<float> scores(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      scores[size_t(e)] = kernels::sigmoid(logits[t * E + e]);
      choice[size_t(e)] = scores[size_t(e)] + w.correction_bias[size_t(e)];
    }
    if (groups > 1) {
      // Group score = sum of the group's two best choice scores; keep the topk_group best groups.
      std::vector<std::pair<float, int64_t>> gs;
      for (int64_t gi = 0; gi < groups; ++gi) {
        float b1 = -std::numeric_limits<float>::infinity(), b2 = b1;
        for (int64_t e = gi * per_group; e < (gi + 1) * per_group; ++e) {
          float v = choice[size_t(e)];
          if (v > b1) {
            b2 = b1;
            b1 = v;
          } else if (v > b2) {
            b2 = v;
          }
        }
        gs.push_back({b1 + b2, gi});
      }
      std::stable_sort(gs.begin(), gs.end(), [](auto& a, auto& b) { return a.first > b.first; });
      std::vector<char> keep(static_cast<size_t>(groups), 0);
      for (int64_t i = 0; i < c.topk_group; ++i) keep[size_t(gs[size_t(i)].second)] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[size_t(e / per_group)]) choice[size_t(e)] = -std::numeric_limits<float>::infinity();
    }
    // Top-k by choice score, descending; ties go to the lower expert id.
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      float ca = choice[size_t(a)], cb = choice[size_t(b)];
      return ca > cb || (ca == cb && a < b);
    });
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += scores[size_t(order[size_t(i)])];
    for (int64_t i = 0; i < k; ++i) {
      int32_t e = order[size_t(i)];
      float wgt = scores[size_t(e)];
      if (c.renormalize) wgt /= (sum + 1e-20f);
      s.route[size_t(t * k + i)] = e;
      s.weight[size_t(t * k + i)] = wgt * c.routed_scaling_factor;
    }
  }
}

void moe_forward(const KimiConfig& c, const MoeWeights& w, ExpertProvider& experts, int layer, const float* x,
                 int64_t T, MoeScratch& s, float* out, MoeCounters* counters) {
  const int64_t H = c.hidden_size, k = c.experts_per_token, R = c.expert_input_size();
  const int64_t I = c.moe_intermediate_size;
  moe_route(c, w, x, T, s);

  const float* z = x;
  if (c.routed_expert_hidden_size > 0) {
    float* zl = s.z.resize(size_t(T * R));
    kernels::linear(w.latent_down, x, T, zl);
    z = zl;
  }

  // The union of routed experts over the pass, and for each its (row, slot) members.
  s.uni.assign(s.route.begin(), s.route.end());
  std::sort(s.uni.begin(), s.uni.end());
  s.uni.erase(std::unique(s.uni.begin(), s.uni.end()), s.uni.end());
  if (counters) {
    counters->expert_requests += int64_t(s.uni.size());
    counters->routed_slots += T * k;
  }

  // Experts are asked for in groups the provider can hold at once; every expert of the union is
  // requested exactly once per pass and run over all rows routed to it.
  float* yexp = s.expert_out.resize(size_t(T * k * R));
  std::vector<int64_t>& members = s.members;
  const size_t group = std::max<size_t>(1, experts.max_batch());
  for (size_t g0 = 0; g0 < s.uni.size(); g0 += group) {
    const size_t gn = std::min(group, s.uni.size() - g0);
    experts.begin(layer, std::span<const int32_t>(s.uni.data() + g0, gn));
    // Experts are computed in the order they land; each writes only its own rows' slots.
    ExpertWeights ew;
    for (int got; (got = experts.next_ready(&ew)) >= 0;) {
      const size_t u = size_t(got);
      members.clear();
      for (int64_t m = 0; m < T * k; ++m)
        if (s.route[size_t(m)] == s.uni[g0 + u]) members.push_back(m);
      const int64_t n = int64_t(members.size());
      float* G = s.gathered.resize(size_t(n * R));
      for (int64_t i = 0; i < n; ++i) {
        const float* src = z + (members[size_t(i)] / k) * R;
        std::copy(src, src + R, G + i * R);
      }
      float* h1 = s.h1.resize(size_t(n * I));
      float* h3 = s.h3.resize(size_t(n * I));
      kernels::linear(ew.gate, G, n, h1);
      kernels::linear(ew.up, G, n, h3);
      gated_activation(c, h1, h3, n * I, h1);
      float* y = s.y.resize(size_t(n * R));
      kernels::linear(ew.down, h1, n, y);
      for (int64_t i = 0; i < n; ++i) std::copy(y + i * R, y + (i + 1) * R, yexp + members[size_t(i)] * R);
    }
    experts.release(layer);
  }

  // Per row, in route order.
  float* routed = s.routed.resize(size_t(T * R));
  std::fill(routed, routed + T * R, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k; ++i)
      kernels::axpy(s.weight[size_t(t * k + i)], yexp + (t * k + i) * R, routed + t * R, R);

  if (c.routed_expert_hidden_size > 0) {
    float* normed = s.normed.resize(size_t(T * R));
    for (int64_t t = 0; t < T; ++t)
      kernels::rmsnorm(routed + t * R, w.latent_norm.empty() ? nullptr : w.latent_norm.data(), R, c.rms_norm_eps,
                       normed + t * R);
    kernels::linear(w.latent_up, normed, T, out);
  } else {
    std::copy(routed, routed + T * H, out);
  }
  if (w.has_shared) {
    float* sh = s.shared.resize(size_t(T * H));
    mlp_forward(c, w.shared, x, T, s.mlp, sh);
    for (int64_t i = 0; i < T * H; ++i) out[i] += sh[i];
  }
}

void attn_res_mix(std::span<const float* const> sources, const std::vector<float>& norm, const std::vector<float>& proj,
                  int64_t T, int64_t H, float eps, float* out) {
  const size_t n = sources.size();
  std::vector<float> q(static_cast<size_t>(H)), p(n);
  for (int64_t d = 0; d < H; ++d) q[size_t(d)] = norm[size_t(d)] * proj[size_t(d)];
  for (int64_t t = 0; t < T; ++t) {
    for (size_t i = 0; i < n; ++i) {
      const float* v = sources[i] + t * H;
      float ss = 0.0f, dot = 0.0f;
      for (int64_t d = 0; d < H; ++d) {
        ss += v[d] * v[d];
        dot += q[size_t(d)] * v[d];
      }
      p[i] = dot / std::sqrt(ss / float(H) + eps);
    }
    kernels::softmax(p.data(), int64_t(n));
    float* o = out + t * H;
    std::fill(o, o + H, 0.0f);
    for (size_t i = 0; i < n; ++i) kernels::axpy(p[i], sources[i] + t * H, o, H);
  }
}

}  // namespace sluice::model
