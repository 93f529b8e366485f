// Record layouts of routed experts that several architectures share: one tensor per expert and
// matrix, named <prefix>{gate,up,down}_proj.<...> as released: BF16 .weight (Qwen3-MoE, DeepSeek-V3,
// Kimi-K2), FP8 e4m3 .weight with F32 block scales .weight_scale_inv (DeepSeek-V3, Kimi-K2), or
// compressed-tensors INT4 .weight_packed (I32, 8 codes each), .weight_scale (BF16 per 32 columns)
// and .weight_shape (I32 [2], the matrix's shape, checked against it) (Kimi-K2-Thinking).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "format/quantization.h"
#include "store/expert_bank.h"

namespace sluice::model {

// Appends gate [inter, hidden], up [inter, hidden] and down [hidden, inter] to `layout`, in that
// record order, in the format `quant` names; `prefix` holds "{L}" and "{E}" (e.g.
// "model.layers.{L}.mlp.experts.{E}.").
void add_per_expert_swiglu(store::ExpertLayout& layout, const std::string& prefix, int64_t hidden, int64_t inter,
                           format::WeightQuant quant);

// The bank of a model whose routed experts are released one tensor per expert and matrix under
// "model.layers.{L}.mlp.experts.{E}." (Qwen3-MoE, DeepSeek-V3, Kimi-K2): `experts` per layer on the
// layers `is_moe` picks out of `layers`; an empty bank when `experts` is 0 (a dense model).
store::ExpertBank per_expert_swiglu_bank(int64_t layers, int64_t experts, const std::function<bool(int)>& is_moe,
                                         int64_t hidden, int64_t inter, format::WeightQuant quant);

}  // namespace sluice::model
