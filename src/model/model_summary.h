// What a model directory is, from its config.json alone (the architecture's tensor list and
// expert bank; no weight is read): parameter counts (total, routed experts, active per token),
// bytes and number formats by tensor class, and the expert bank. For `sluice info` and `sluice
// doctor`, which describe a model before anyone loads it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/expert_bank.h"

namespace sluice::model {

// One class of tensors (embedding, attention, routed experts, ...): parameters, bytes, and bytes
// by number format ("BF16", "F32", "FP8_E4M3", "MXFP4", "INT4_G32", "scales" for block, group or
// MXFP4 scales, "shapes" for compressed-tensors' weight_shape).
struct TensorClass {
  std::string name;
  int64_t tensors = 0, params = 0;
  uint64_t bytes = 0;
  std::map<std::string, uint64_t> bytes_by_format;
};

struct ModelSummary {
  std::string model_type, family;
  int64_t layers = 0;
  int64_t top_k = 0;                // routed experts per token (0: dense)
  int64_t total_params = 0;         // every weight, scales excluded (an MXFP4 byte holds two, an INT4 int32 eight)
  int64_t routed_params = 0;        // the routed experts of every MoE layer
  int64_t params_per_expert = 0;
  int64_t active_params = 0;        // per token: everything but the routed experts, plus top_k of them per MoE layer
  uint64_t resident_bytes = 0;      // every tensor but the routed experts: what stays in memory when streaming
  uint64_t routed_bytes = 0;        // the expert bank's records (what `prepare` lays out on homes)
  uint64_t routed_bytes_per_token = 0;  // top_k records per MoE layer: one token's reads with nothing cached
  std::vector<TensorClass> classes;  // in a fixed order, empty classes left out
  store::ExpertBank bank;
};

// Reads dir/config.json and describes the checkpoint it implies. Throws naming the file for a config
// no registered architecture accepts.
ModelSummary summarize_model(const std::string& dir);

// Whether checkpoint tensor `name` is one of `pattern`'s ("{L}" and "{E}" stand for decimal numbers).
bool tensor_name_matches(const std::string& name, const std::string& pattern);

}  // namespace sluice::model
