// The MLA block: projections, cache write, RoPE (DeepSeek-V3; K3 and transformers' kimi_linear
// apply no rotation), absorbed attention, gate, output projection.
#include "model/blocks/mla.h"

#include <cmath>

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::LinearOut;

void mla_forward(device::Device& d, const MlaSpec& s, const MlaWeights& w, Buf latent, Buf k_pe, int64_t base,
                 const Buf& x, Buf out, const std::atomic<bool>* cancel, const Buf& rope_table) {
  device::ScratchScope scope(d);
  const int64_t T = x.rows, nh = s.heads, qk = s.nope + s.rope, vd = s.v_dim;
  Buf q = d.scratch(BufType::F32, T, nh * qk);
  Buf kv = d.scratch(BufType::F32, T, s.kv_rank + s.rope);
  Buf gate = s.output_gate ? d.scratch(BufType::F32, T, nh * vd) : Buf{};
  LinearOut outs[3];
  size_t n = 0;
  Buf qa;
  if (s.q_lora_rank > 0) {
    qa = d.scratch(BufType::F32, T, s.q_lora_rank);
    outs[n++] = {&w.q_a, qa};
  } else {
    outs[n++] = {&w.q, q};
  }
  outs[n++] = {&w.kv_a, kv};
  if (s.output_gate) outs[n++] = {&w.g, gate};
  d.linear(x, std::span<const LinearOut>(outs, n));
  if (s.q_lora_rank > 0) {
    d.rmsnorm(qa, w.q_a_norm.v, s.norm_eps, qa);
    const LinearOut qb[] = {{&w.q_b, q}};
    d.linear(qa, qb);
  }
  d.mla_cache_write(kv, w.kv_a_norm.v, s.norm_eps, latent, k_pe, base);
  if (s.rotate) {
    // The rope part of every head's query, and the one shared rope key of each new position as
    // cached: attention then scores rotated q·k without touching the cache again.
    d.rope(rope_table, s.pairs, q, nh, qk, s.nope, s.rope);
    d.rope(rope_table, s.pairs, k_pe.rows_view(base, T), 1, s.rope, 0, s.rope);
  }
  Buf attn = d.scratch(BufType::F32, T, nh * vd);
  const float scale = s.scale > 0 ? s.scale : 1.0f / std::sqrt(float(qk));
  const device::MlaOp op{.heads = nh, .nope = s.nope, .rope = s.rope, .v_dim = vd, .kv_rank = s.kv_rank,
                          .scale = scale, .causal = true, .kv_b = &w.kv_b};
  for_attention_slices(T, cancel, [&](int64_t r0, int64_t n) {
    d.mla_attention(op, q.rows_view(r0, n), latent, k_pe, base + 1 + r0, attn.rows_view(r0, n));
  });
  if (s.output_gate) d.mul_sigmoid(attn, gate);
  const LinearOut o[] = {{&w.o, out}};
  d.linear(attn, o);
}

}  // namespace sluice::model
