// A checkpoint's quantization_config as the architectures that ship FP8 read it: none (BF16 or
// F32 weights) or FP8 e4m3 with one F32 scale per 128x128 block ("weight_scale_inv"), the form of
// DeepSeek-V3, Kimi-K2 and Qwen3's FP8 releases. Any other quant_method, format or block size is
// refused by name (a checkpoint whose numbers sluice would misread must not load).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace sluice::format {

enum class WeightQuant { None, Fp8Block };

WeightQuant parse_weight_quant(const nlohmann::json& root, const std::string& where);

}  // namespace sluice::format
