// Record layouts of routed experts that several architectures share: one tensor per expert and
// matrix, named <prefix>{gate,up,down}_proj.weight, BF16, or FP8 e4m3 with F32 block scales in
// <...>.weight_scale_inv (Qwen3-MoE, DeepSeek-V3, Kimi-K2 as released).
#pragma once
#include <cstdint>
#include <string>

#include "store/expert_bank.h"

namespace sluice::model {

// Appends gate [inter, hidden], up [inter, hidden] and down [hidden, inter] to `layout`, in that
// record order; `prefix` holds "{L}" and "{E}" (e.g. "model.layers.{L}.mlp.experts.{E}.").
void add_per_expert_swiglu(store::ExpertLayout& layout, const std::string& prefix, int64_t hidden, int64_t inter,
                           bool fp8);

}  // namespace sluice::model
