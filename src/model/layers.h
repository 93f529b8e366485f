// Layer kernels of the Kimi family, each over T rows at once (a multi-position pass) with the
// per-row results independent of T: KDA (short conv, channel-wise decay, delta rule, gated
// output norm), MLA over the compact latent cache, dense MLP, MoE (router, routed experts via the
// ExpertProvider, latent projection, shared experts) and Block AttnRes mixing.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "store/expert_provider.h"
#include "model/kimi_weights.h"
#include "model/state.h"

namespace sluice::model {

using store::ExpertProvider;
using store::ExpertWeights;

struct KdaScratch {
  FloatBuffer qh, kh, vh, qc, kc, vc, fa, g, beta, gate, ga, o;
};
// x: [T, H] normalised attention input; out: [T, H]. `rec` (optional) receives what replay needs.
void kda_forward(const KimiConfig& c, const KdaWeights& w, KdaLayerState& st, const float* x, int64_t T,
                 KdaRowRecord* rec, KdaScratch& s, float* out);
// Re-applies the first n recorded rows to `st` (restored to the state before the pass).
void kda_replay(const KimiConfig& c, KdaLayerState& st, const KdaRowRecord& rec, int64_t n);

struct MlaScratch {
  FloatBuffer qa, q, kv, gate, attn, per_head;
};
// Rows are at positions base..base+T-1; their latents are written into the cache there.
void mla_forward(const KimiConfig& c, const MlaWeights& w, MlaLayerState& st, int64_t base, const float* x, int64_t T,
                 MlaScratch& s, float* out);

struct MlpScratch {
  FloatBuffer g, u;
};
void mlp_forward(const KimiConfig& c, const MlpWeights& w, const float* x, int64_t T, MlpScratch& s, float* out);
// The SiLU-gated MLP (SwiGLU) of Qwen3 and DSpark: out = down(silu(gate·x) ⊙ up·x).
void swiglu_forward(const MlpWeights& w, const float* x, int64_t T, MlpScratch& s, float* out);

// Counters of one MoE pass, summed by the caller.
struct MoeCounters {
  int64_t expert_requests = 0;  // experts asked of the provider (the union per pass)
  int64_t routed_slots = 0;     // rows × top-k
};

struct MoeScratch {
  FloatBuffer logits, z, gathered, h1, h3, y, expert_out, routed, normed, shared;
  MlpScratch mlp;
  std::vector<int32_t> route;    // [T, k] expert ids in route order
  std::vector<float> weight;     // [T, k]
  std::vector<int32_t> uni;      // union of experts, ascending
  std::vector<int64_t> members;  // (row*k + slot) grouped by expert
};
// Router of one MoE layer for T rows: fills route/weight ([T,k], descending choice score).
void moe_route(const KimiConfig& c, const MoeWeights& w, const float* x, int64_t T, MoeScratch& s);
void moe_forward(const KimiConfig& c, const MoeWeights& w, ExpertProvider& experts, int layer, const float* x,
                 int64_t T, MoeScratch& s, float* out, MoeCounters* counters);

// Block AttnRes mixing: for each row, softmax over sources of proj·RMSNorm_norm(v_i), then the
// weighted sum of the raw sources. sources: pointers to [T, H] arrays.
void attn_res_mix(std::span<const float* const> sources, const std::vector<float>& norm, const std::vector<float>& proj,
                  int64_t T, int64_t H, float eps, float* out);

// Applies the configured gated activation elementwise: out[i] = act(g[i], u[i]).
void gated_activation(const KimiConfig& c, const float* g, const float* u, int64_t n, float* out);

}  // namespace sluice::model
