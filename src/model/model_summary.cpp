// A model described from its config: the registered architecture's roster (every tensor the
// config implies, routed experts expanded) sorted into classes by name, with parameters and bytes.
#include "model/model_summary.h"

#include <array>

#include "core/error.h"
#include "core/regular_file.h"
#include "format/json_util.h"
#include "model/registry.h"

namespace sluice::model {
namespace {

// The classes, in the order they are listed.
constexpr std::array<const char*, 10> kClasses = {
    "embedding", "attention", "AttnRes", "dense MLP", "shared experts", "MoE projections", "router", "routed experts",
    "norms",     "lm_head"};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool ends(const std::string& s, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The class of a tensor that is not a routed expert, by its checkpoint name.
const char* class_of(const std::string& name) {
  if (has(name, "embed_tokens")) return "embedding";
  if (has(name, "lm_head")) return "lm_head";
  if (has(name, "_res_norm") || has(name, "_res_proj")) return "AttnRes";
  if (ends(name, "norm.weight")) return "norms";
  if (has(name, ".gate.") || has(name, ".router.")) return "router";
  if (has(name, "shared_expert")) return "shared experts";
  if (has(name, "routed_expert_")) return "MoE projections";
  if (has(name, "attn")) return "attention";
  return "dense MLP";
}

// Packed weights: MXFP4 (two 4-bit values a byte) or compressed-tensors INT4 (eight an int32).
bool packed_int4(const TensorSpec& t) { return t.init == Init::Packed && t.dtype == DType::I32; }
bool is_scale(const TensorSpec& t) {
  return t.init == Init::Scale || t.init == Init::BlockScale || t.init == Init::GroupScale;
}

const char* format_of(const TensorSpec& t) {
  if (t.init == Init::Packed) return packed_int4(t) ? "INT4_G32" : "MXFP4";
  if (is_scale(t)) return "scales";
  if (t.init == Init::MatrixShape) return "shapes";
  switch (t.dtype) {
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::F8_E4M3: return "FP8_E4M3";
    default: return "other";
  }
}

int64_t params_of(const TensorSpec& t) {
  if (is_scale(t) || t.init == Init::MatrixShape) return 0;
  if (t.init == Init::Packed) return (packed_int4(t) ? 8 : 2) * t.numel();
  return t.numel();
}

// An integer field of the config's root or of its text_config (K3 nests the language model's).
int64_t config_int(const nlohmann::json& root, std::initializer_list<const char*> keys) {
  for (const nlohmann::json* obj : {&root, root.contains("text_config") ? &root["text_config"] : nullptr}) {
    if (!obj || !obj->is_object()) continue;
    for (const char* k : keys)
      if (obj->contains(k) && (*obj)[k].is_number_integer()) return (*obj)[k].get<int64_t>();
  }
  return 0;
}

}  // namespace

bool tensor_name_matches(const std::string& name, const std::string& pattern) {
  size_t i = 0, p = 0;
  while (p < pattern.size()) {
    if (pattern.compare(p, 3, "{L}") == 0 || pattern.compare(p, 3, "{E}") == 0) {
      const size_t start = i;
      while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
      if (i == start) return false;
      p += 3;
    } else {
      if (i >= name.size() || name[i] != pattern[p]) return false;
      ++i;
      ++p;
    }
  }
  return i == name.size();
}

ModelSummary summarize_model(const std::string& dir) {
  const std::string where = dir + "/config.json";
  const std::string text = read_regular_file(where);
  ModelSummary s;
  s.model_type = model_type_of(text, where);
  const Architecture& arch = find_architecture(s.model_type, where);
  s.family = arch.family;
  s.bank = arch.expert_bank(text, where);
  const nlohmann::json root = format::parse_json_text(text, where);
  s.layers = config_int(root, {"num_hidden_layers"});
  s.top_k = s.bank.empty() ? 0 : config_int(root, {"num_experts_per_tok", "num_experts_per_token", "experts_per_token"});

  std::vector<TensorClass> classes(kClasses.size());
  for (size_t i = 0; i < kClasses.size(); ++i) classes[i].name = kClasses[i];
  auto add = [&](const char* cls, const TensorSpec& t) {
    for (TensorClass& c : classes) {
      if (c.name != cls) continue;
      const uint64_t bytes = uint64_t(t.numel()) * uint64_t(dtype_size(t.dtype));
      c.tensors += 1;
      c.params += params_of(t);
      c.bytes += bytes;
      c.bytes_by_format[format_of(t)] += bytes;
    }
  };
  for (const TensorSpec& t : arch.roster(text, where)) {
    bool routed = false;
    for (const store::ExpertSegment& seg : s.bank.layout.segments) routed = routed || tensor_name_matches(t.name, seg.tensor);
    add(routed ? "routed experts" : class_of(t.name), t);
  }
  for (TensorClass& c : classes) {
    s.total_params += c.params;
    if (c.name == "routed experts") {
      s.routed_params = c.params;
    } else {
      s.resident_bytes += c.bytes;
    }
    if (c.tensors > 0) s.classes.push_back(std::move(c));
  }
  const int64_t experts = int64_t(s.bank.moe_layers.size()) * s.bank.num_experts;
  s.params_per_expert = experts > 0 ? s.routed_params / experts : 0;
  s.active_params = s.total_params - s.routed_params + int64_t(s.bank.moe_layers.size()) * s.top_k * s.params_per_expert;
  s.routed_bytes = s.bank.total_record_bytes();
  s.routed_bytes_per_token = uint64_t(s.bank.moe_layers.size()) * uint64_t(s.top_k) * s.bank.layout.record_bytes;
  return s;
}

}  // namespace sluice::model
