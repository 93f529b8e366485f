// Multi-head latent attention over the compact cache (Kimi's MLA layers, DeepSeek-V3's): the q (or
// q_a → norm → q_b), kv_a and output-gate projections in one launch, the cache write of this
// pass's rows, RoPE on the rope part of q and of the cached k_pe (DeepSeek-V3; Kimi's MLA has
// none), absorbed attention, the sigmoid output gate and o_proj.
#pragma once
#include <atomic>

#include "device/device.h"
#include "model/pass_options.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct MlaWeights {
  device::Weight q, q_a, q_b, kv_a, kv_b, g, o;  // q (no q_lora) or q_a/q_b; g only with the output gate
  Param q_a_norm, kv_a_norm;
};

struct MlaSpec {
  int64_t heads = 0, q_lora_rank = 0, kv_rank = 0, nope = 0, rope = 0, v_dim = 0;
  float norm_eps = 1e-6f;  // q_a_layernorm / kv_a_layernorm
  bool output_gate = false;
  bool rotate = false;     // RoPE on q's and k's rope parts (pairs as `pairs`), from the pass's table
  device::RopePairs pairs = device::RopePairs::Interleaved;
  float scale = 0.0f;      // the softmax scale; 0: (nope + rope)^-0.5
};

// Rows are at positions base..base+T-1; their latents are written into the cache (latent, k_pe:
// [capacity, kv_rank] and [capacity, rope]) there, k_pe rotated when s.rotate. rope_table: the
// pass's [T, rope] cos/sin rows (empty unless s.rotate). cancel: see for_attention_slices.
void mla_forward(device::Device& d, const MlaSpec& s, const MlaWeights& w, device::Buf latent, device::Buf k_pe,
                 int64_t base, const device::Buf& x, device::Buf out, const std::atomic<bool>* cancel = nullptr,
                 const device::Buf& rope_table = {});

}  // namespace sluice::model
