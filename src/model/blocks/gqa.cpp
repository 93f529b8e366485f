// The GQA block. Every row's attention is computed by the same code whatever the pass length, so a
// T-row pass equals T one-row passes bit for bit.
#include "model/blocks/gqa.h"

#include <cmath>

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::LinearOut;

void gqa_forward(device::Device& d, const GqaSpec& s, const GqaWeights& w, const Buf& rope_table, Buf k_cache,
                 Buf v_cache, int64_t base, const Buf& x, Buf out, const std::atomic<bool>* cancel) {
  device::ScratchScope scope(d);
  const int64_t T = x.rows, D = s.head_dim, qd = s.heads * D, kvd = s.kv_heads * D;
  Buf q = d.scratch(BufType::F32, T, qd);
  Buf k = d.scratch(BufType::F32, T, kvd);
  Buf v = d.scratch(BufType::F32, T, kvd);
  const LinearOut qkv[] = {{&w.q, q}, {&w.k, k}, {&w.v, v}};
  d.linear(x, qkv);
  // Per-head RMSNorm, then RoPE over the whole head.
  if (!w.q_norm.empty()) d.rmsnorm(q, w.q_norm.v, s.norm_eps, q, D);
  if (!w.k_norm.empty()) d.rmsnorm(k, w.k_norm.v, s.norm_eps, k, D);
  d.rope(rope_table, s.pairs, q, s.heads, D, 0, D);
  d.rope(rope_table, s.pairs, k, s.kv_heads, D, 0, D);
  d.copy(k_cache.rows_view(base, T), k);
  d.copy(v_cache.rows_view(base, T), v);
  Buf attn = d.scratch(BufType::F32, T, qd);
  const device::GqaOp op{.heads = s.heads, .kv_heads = s.kv_heads, .head_dim = D,
                          .scale = 1.0f / std::sqrt(float(D)), .window = s.window, .sinks = w.sinks.v};
  for_attention_slices(T, cancel, [&](int64_t r0, int64_t n) {
    d.gqa_attention(op, q.rows_view(r0, n), k_cache, v_cache, base + 1 + r0, attn.rows_view(r0, n));
  });
  const LinearOut o[] = {{&w.o, out}};
  d.linear(attn, o);
}

}  // namespace sluice::model
