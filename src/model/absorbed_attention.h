// Multi-head latent attention in its absorbed form over a compact cache, shared by the target's
// MLA layers and the DSpark drafter: per head, kv_b's key rows are folded into the query (scores
// against normalised latents need no expanded keys) and its value rows expand the attended
// latent afterwards, so the cache stays kv_lora_rank + rope floats per position.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "kernels/cpu/kernels.h"

namespace sluice::model {

struct AbsorbedAttentionShape {
  int64_t heads = 0, nope = 0, rope = 0, v_dim = 0, kv_rank = 0;
};

// q: [T, heads, nope + rope] (rope part already rotated where the model rotates); lat: [n, kv_rank]
// and kpe: [n, rope] cached rows. Row t attends to cached rows 0..visible0 + (causal ? t : 0) - 1.
// out: [T, heads, v_dim]. scratch is resized as needed. Per-row results do not depend on T.
void absorbed_attention(const kernels::Weight& kv_b, const AbsorbedAttentionShape& s, const float* q, int64_t T,
                        const float* lat, const float* kpe, int64_t visible0, bool causal, float scale,
                        FloatBuffer& scratch, float* out);

}  // namespace sluice::model
