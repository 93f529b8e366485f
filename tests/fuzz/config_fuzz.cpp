// libFuzzer target for config.json of every architecture: the input is the file's text. The
// registry's dispatch (model/registry.cpp model_type_of + find_architecture) is redone here on the
// root's model_type, and every parser (Kimi K3 / Kimi-Linear, Qwen3 / Qwen3-MoE, DeepSeek-V3 /
// Kimi-K2, gpt-oss, DSpark) also gets every input, whatever it names. Parsing may only succeed or
// throw sluice::Error; a config it accepts must name its own architecture, have positive sizes, and
// give finite RoPE frequencies and magnitudes.
// fuzz-sources: src/model/arch/kimi_config.cpp src/model/arch/qwen3_config.cpp src/model/arch/dspark_config.cpp
// fuzz-sources: src/model/arch/deepseek_config.cpp src/model/arch/gpt_oss_config.cpp src/format/rope_params.cpp
// fuzz-sources: src/format/quantization.cpp src/format/token_ids.cpp
// fuzz-sources: src/format/json_util.cpp src/core/regular_file.cpp
// fuzz-libs: -lpcre2-8
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include <cmath>

#include "model/arch/deepseek_config.h"
#include "model/arch/dspark_config.h"
#include "model/arch/gpt_oss_config.h"
#include "format/json_util.h"
#include "model/arch/kimi_config.h"
#include "model/arch/qwen3_config.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_rope(const sluice::format::RopeParams& r, int64_t dim) {
  for (double f : sluice::format::rope_inv_freq(r, dim)) check(std::isfinite(f) && f >= 0);
  const double m = sluice::format::rope_attention_factor(r);
  check(std::isfinite(m) && m > 0);
}

// What config.json's root says model_type is ("" when it is not an object with a string there).
std::string model_type(const std::string& text) {
  auto j = sluice::format::parse_json_or_discarded<nlohmann::json>(text);
  if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string()) return "";
  return j["model_type"].get<std::string>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::format;
  using namespace sluice::model;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string type = model_type(text);
  const bool kimi_type = type == "kimi_k3" || type == "kimi_linear";
  try {
    KimiConfig c = parse_kimi_config(text, "fuzz/config.json");
    check(kimi_type);
    check(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0);
  } catch (const Error&) {
  }
  try {
    Qwen3Config c = parse_qwen3_config(text, "fuzz/config.json");
    check(type == "qwen3" || type == "qwen3_moe");
    check(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0 && c.head_dim > 0);
    check(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0);
    check(int64_t(c.sparse.size()) == c.num_layers);
    check(c.num_experts == 0 || (c.experts_per_token > 0 && c.experts_per_token <= c.num_experts));
    check_rope(c.rope, c.head_dim);
  } catch (const Error&) {
  }
  try {
    DeepSeekConfig c = parse_deepseek_config(text, "fuzz/config.json");
    check(type == "deepseek_v3" || type == "kimi_k2");
    check(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0 && c.kv_lora_rank > 0);
    check(c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 == 0);
    check(c.num_experts == 0 || (c.num_experts % c.n_group == 0 && c.topk_group <= c.n_group &&
                                 c.experts_per_token <= c.topk_group * (c.num_experts / c.n_group)));
    check(std::isfinite(c.softmax_scale()) && c.softmax_scale() > 0);
    check_rope(c.rope, c.qk_rope_head_dim);
  } catch (const Error&) {
  }
  try {
    GptOssConfig c = parse_gpt_oss_config(text, "fuzz/config.json");
    check(type == "gpt_oss");
    check(c.vocab_size > 0 && c.hidden_size % 32 == 0 && c.intermediate_size % 32 == 0 && c.num_experts > 0);
    check(c.experts_per_token <= c.num_experts && int64_t(c.sliding.size()) == c.num_layers);
    check_rope(c.rope, c.head_dim);
  } catch (const Error&) {
  }
  try {
    DSparkConfig c = parse_dspark_config(text, "fuzz/config.json");
    check(c.hidden_size > 0 && c.num_layers > 0 && c.vocab_size > 0);
  } catch (const Error&) {
  }
  return 0;
}
