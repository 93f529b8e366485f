// quantization_config: FP8 block quantization or nothing.
#include "format/quantization.h"

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::format {

WeightQuant parse_weight_quant(const nlohmann::json& root, const std::string& where) {
  if (!has_field(root, "quantization_config")) return WeightQuant::None;
  const std::string qw = field_where(where, "quantization_config");
  const nlohmann::json& q = get_object(root, "quantization_config", where);
  const std::string method = get_string(q, "quant_method", qw);
  if (method == "compressed-tensors")
    fail(qw, ": compressed-tensors checkpoints (", get_string_or(q, "format", "?", qw),
         ", e.g. Kimi-K2-Thinking's INT4 experts) are not supported yet; FP8 ('fp8') and BF16 checkpoints are");
  if (method != "fp8") fail(qw, ": quant_method '", method, "' is not supported (sluice reads 'fp8' block checkpoints)");
  const std::string fmt = get_string_or(q, "fmt", "e4m3", qw);
  if (fmt != "e4m3") fail(qw, ": fmt '", fmt, "' is not supported (FP8 weights must be e4m3)");
  // The kernels' block (kernels::kFp8Block); format/ sits below kernels/ and repeats the number.
  const std::vector<int64_t> block = get_int_list(q, "weight_block_size", qw);
  if (block != std::vector<int64_t>{128, 128}) fail(qw, ": weight_block_size must be [128, 128] (one scale per block)");
  const std::string act = get_string_or(q, "activation_scheme", "dynamic", qw);
  if (act != "dynamic")
    fail(qw, ": activation_scheme '", act, "' is not supported (sluice keeps activations in fp32: 'dynamic')");
  return WeightQuant::Fp8Block;
}

}  // namespace sluice::format
