// Grouped-query attention over a KV cache (Qwen3 and the families that share its attention):
// q/k/v projections in one launch, optional per-head q/k RMSNorm before RoPE, the cache write of
// this pass's rows, causal attention (optionally windowed, with learned sinks), o_proj.
#pragma once
#include <atomic>

#include "device/device.h"
#include "model/pass_options.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct GqaWeights {
  device::Weight q, k, v, o;
  Param q_norm, k_norm;  // [head_dim] each, empty without q/k norm
  Param sinks;           // [heads], empty without learned sinks
};

struct GqaSpec {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float norm_eps = 1e-6f;
  device::RopePairs pairs = device::RopePairs::Half;
  int64_t window = 0;  // > 0: sliding-window layer
};

// rope_table: the pass's cos/sin rows (Device::rope_table); k_cache/v_cache: [capacity, kv_dim].
// cancel: see for_attention_slices.
void gqa_forward(device::Device& d, const GqaSpec& s, const GqaWeights& w, const device::Buf& rope_table,
                 device::Buf k_cache, device::Buf v_cache, int64_t base, const device::Buf& x, device::Buf out,
                 const std::atomic<bool>* cancel = nullptr);

}  // namespace sluice::model
