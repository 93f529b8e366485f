// quantization_config: FP8 blocks, compressed-tensors pack-quantized int4 group 32, or nothing;
// compressed-tensors' module matching for its ignore list.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "format/quantization.h"

#include <pcre2.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::format {
namespace {

using nlohmann::json;

QuantConfig parse_fp8(const json& q, const std::string& qw) {
  const std::string fmt = get_string_or(q, "fmt", "e4m3", qw);
  if (fmt != "e4m3") fail(qw, ": fmt '", fmt, "' is not supported (FP8 weights must be e4m3)");
  // The kernels' block (device::kFp8Block); format/ sits below device/ and repeats the number.
  const std::vector<int64_t> block = get_int_list(q, "weight_block_size", qw);
  if (block != std::vector<int64_t>{128, 128}) fail(qw, ": weight_block_size must be [128, 128] (one scale per block)");
  const std::string act = get_string_or(q, "activation_scheme", "dynamic", qw);
  if (act != "dynamic")
    fail(qw, ": activation_scheme '", act, "' is not supported (sluice keeps activations in fp32: 'dynamic')");
  return {.kind = WeightQuant::Fp8Block};
}

// Fields of an object that may only be absent or null (each changes what the stored numbers mean).
void refuse_set(const json& obj, std::initializer_list<std::pair<const char*, const char*>> fields,
                const std::string& where) {
  for (const auto& [field, what] : fields)
    if (has_field(obj, field)) fail(where, ": ", field, " ", describe_json(obj[field]), " is not supported (", what, ")");
}

// Every key of `obj` must be one sluice knows the meaning of.
void refuse_unknown(const json& obj, std::initializer_list<const char*> known, const std::string& where) {
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
      fail(where, ": field '", key, "' is not supported (sluice reads symmetric int4 weights, group size 32, "
           "pack-quantized)");
  }
}

// The one weight scheme sluice reads from compressed-tensors: symmetric static int4, one scale per
// 32 input columns, 8 codes per int32 (Kimi-K2-Thinking's routed experts).
void check_int4_weights(const json& w, const std::string& ww) {
  refuse_unknown(w,
                 {"num_bits", "type", "symmetric", "strategy", "group_size", "dynamic", "actorder", "block_structure",
                  "observer", "observer_kwargs", "scale_dtype", "zp_dtype"},
                 ww);
  const int64_t bits = get_int(w, "num_bits", ww);
  if (bits != 4) fail(ww, ": num_bits ", bits, " is not supported (sluice reads 4-bit weights)");
  const std::string type = get_string(w, "type", ww);
  if (type != "int") fail(ww, ": type '", type, "' is not supported (sluice reads 'int' weights)");
  if (!get_bool(w, "symmetric", ww)) fail(ww, ": symmetric false (zero points) is not supported (symmetric int4 only)");
  const std::string strategy = get_string(w, "strategy", ww);
  if (strategy != "group") fail(ww, ": strategy '", strategy, "' is not supported (sluice reads 'group' scales)");
  const int64_t group = get_int(w, "group_size", ww);
  if (group != 32) fail(ww, ": group_size ", group, " is not supported (sluice reads groups of 32)");
  if (get_bool_or(w, "dynamic", false, ww)) fail(ww, ": dynamic true is not supported (the scales must be stored)");
  refuse_set(w, {{"actorder", "activation ordering"}, {"block_structure", "block scales"}, {"zp_dtype", "zero points"}},
             ww);
  const std::string scale_dtype = get_string_or(w, "scale_dtype", "torch.bfloat16", ww);
  if (scale_dtype != "torch.bfloat16" && scale_dtype != "bfloat16")
    fail(ww, ": scale_dtype '", scale_dtype, "' is not supported (BF16 scales)");
}

QuantConfig parse_compressed_tensors(const json& q, const std::string& qw) {
  const std::string fmt = get_string_or(q, "format", "", qw);
  if (fmt != "pack-quantized")
    fail(qw, ": compressed-tensors format '", fmt, "' is not supported (sluice reads 'pack-quantized' int4, as in "
         "Kimi-K2-Thinking)");
  const std::string status = get_string_or(q, "quantization_status", "compressed", qw);
  if (status != "compressed")
    fail(qw, ": quantization_status '", status, "' is not supported (the weights must be stored 'compressed')");
  refuse_set(q,
             {{"kv_cache_scheme", "KV-cache quantization"},
              {"sparsity_config", "sparse weights"},
              {"transform_config", "transformed weights"}},
             qw);
  const json& groups = get_object(q, "config_groups", qw);
  const std::string gsw = field_where(qw, "config_groups");
  if (groups.size() != 1)
    fail(gsw, ": ", groups.size(), " groups; sluice reads one (int4 weights of every Linear module not ignored)");
  const std::string gw = field_where(gsw, groups.begin().key());
  const json& g = groups.begin().value();
  if (!g.is_object()) fail(gw, ": expected an object, got ", describe_json(g));
  refuse_unknown(g, {"targets", "weights", "input_activations", "output_activations", "format"}, gw);
  if (get_string_list(g, "targets", gw) != std::vector<std::string>{"Linear"})
    fail(gw, ": targets ", describe_json(g["targets"]), " are not supported (sluice reads [\"Linear\"])");
  refuse_set(g,
             {{"input_activations", "activation quantization: sluice keeps activations in fp32"},
              {"output_activations", "activation quantization: sluice keeps activations in fp32"}},
             gw);
  const std::string group_fmt = get_string_or(g, "format", fmt, gw);
  if (group_fmt != "pack-quantized") fail(gw, ": format '", group_fmt, "' is not supported (pack-quantized)");
  check_int4_weights(get_object(g, "weights", gw), field_where(gw, "weights"));
  QuantConfig out{.kind = WeightQuant::Int4Group32};
  if (has_field(q, "ignore")) out.ignore = get_string_list(q, "ignore", qw);
  ModuleMatcher compiled(out.ignore, field_where(qw, "ignore"));  // refuses a pattern now, not at load
  return out;
}

}  // namespace

QuantConfig parse_quant_config(const json& root, const std::string& where) {
  if (!has_field(root, "quantization_config")) return {};
  const std::string qw = field_where(where, "quantization_config");
  const json& q = get_object(root, "quantization_config", where);
  const std::string method = get_string(q, "quant_method", qw);
  if (method == "fp8") return parse_fp8(q, qw);
  if (method == "compressed-tensors") return parse_compressed_tensors(q, qw);
  fail(qw, ": quant_method '", method, "' is not supported (sluice reads 'fp8' block and 'compressed-tensors' "
       "pack-quantized int4 checkpoints)");
}

WeightQuant parse_weight_quant(const json& root, const std::string& where) { return parse_quant_config(root, where).kind; }

// ---- module matching ----

struct ModuleMatcher::Impl {
  std::vector<std::string> names;    // exact names
  std::vector<pcre2_code*> patterns;  // "re:" entries
  bool every_linear = false;          // the class name "Linear"
  pcre2_match_context* context = nullptr;
  std::string where;
  ~Impl() {
    for (pcre2_code* p : patterns) pcre2_code_free(p);
    pcre2_match_context_free(context);
  }
};

ModuleMatcher::ModuleMatcher(const std::vector<std::string>& entries, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  impl_->where = where;
  // A pattern from a file may be written to backtrack without end: bound the work per match.
  impl_->context = pcre2_match_context_create(nullptr);
  if (!impl_->context) fail(where, ": out of memory compiling the module patterns");
  pcre2_set_match_limit(impl_->context, 1000000);
  pcre2_set_depth_limit(impl_->context, 10000);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    if (e == "Linear") {
      impl_->every_linear = true;
    } else if (e.rfind("re:", 0) == 0) {
      int code = 0;
      PCRE2_SIZE offset = 0;
      pcre2_code* p = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(e.data() + 3), e.size() - 3, 0, &code, &offset, nullptr);
      if (!p) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(code, msg.data(), msg.size());
        fail(where, "[", i, "]: pattern '", e.substr(3), "' does not compile at offset ", offset, ": ",
             reinterpret_cast<const char*>(msg.data()));
      }
      impl_->patterns.push_back(p);
    } else {
      impl_->names.push_back(e);
    }
  }
}

ModuleMatcher::~ModuleMatcher() = default;

bool ModuleMatcher::matches(std::string_view module) const {
  if (impl_->every_linear) return true;
  for (const std::string& n : impl_->names)
    if (n == module) return true;
  for (pcre2_code* p : impl_->patterns) {
    pcre2_match_data* data = pcre2_match_data_create_from_pattern(p, nullptr);
    if (!data) fail(impl_->where, ": out of memory matching ", std::string(module));
    const int rc = pcre2_match(p, reinterpret_cast<PCRE2_SPTR>(module.data()), module.size(), 0, PCRE2_ANCHORED, data,
                               impl_->context);
    pcre2_match_data_free(data);
    if (rc >= 0) return true;
    if (rc != PCRE2_ERROR_NOMATCH)
      fail(impl_->where, ": matching module ", std::string(module), " against a pattern failed (PCRE2 error ", rc,
           ", e.g. too much backtracking)");
  }
  return false;
}

}  // namespace sluice::format
