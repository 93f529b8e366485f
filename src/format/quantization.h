// A checkpoint's quantization_config as the architectures of issue 17 read it: none (BF16 or F32
// weights); FP8 e4m3 with one F32 scale per 128x128 block ("weight_scale_inv"), the form of
// DeepSeek-V3, Kimi-K2 and Qwen3's FP8 releases; or compressed-tensors' pack-quantized symmetric
// int4 with group size 32 and BF16 scales (Kimi-K2-Thinking), with its `ignore` list saying which
// Linear modules stayed unquantized. Every other quant_method, format, bit width, strategy, group
// size, activation or KV-cache quantization is refused by name (a checkpoint whose numbers sluice
// would misread must not load).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::format {

enum class WeightQuant { None, Fp8Block, Int4Group32 };

struct QuantConfig {
  WeightQuant kind = WeightQuant::None;
  // Int4Group32: compressed-tensors' `ignore` entries (the Linear modules left in BF16).
  std::vector<std::string> ignore;
};

// Throws sluice::Error naming `where` and the field for anything but the three forms above.
QuantConfig parse_quant_config(const nlohmann::json& root, const std::string& where);
// The kind alone, for architectures whose modules need no ignore list.
WeightQuant parse_weight_quant(const nlohmann::json& root, const std::string& where);

// compressed-tensors' matching of a module against ignore entries: "re:" + a regular expression
// matched at the start of the module's name (Python's re.match; PCRE2 here), or an exact name, or
// the class name "Linear" (every module asked about is a Linear). Compiled once.
class ModuleMatcher {
 public:
  // Throws naming `where` and the entry for a pattern that does not compile.
  ModuleMatcher(const std::vector<std::string>& entries, const std::string& where);
  ~ModuleMatcher();
  ModuleMatcher(const ModuleMatcher&) = delete;
  ModuleMatcher& operator=(const ModuleMatcher&) = delete;
  bool matches(std::string_view module) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::format
