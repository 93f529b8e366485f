// Shared keys of the GGUF mappings. The RoPE check compares, for the config's YaRN parameters, what
// transformers' modeling_rope_utils (and sluice, format/rope_params) computes with what llama.cpp's
// context and graph derive from the keys its converter writes (llama-context.cpp's
// yarn_attn_factor, ggml's rope_yarn, deepseek2.cpp's kq_scale).
#include "export/export_common.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "export/gguf_vocab.h"
#include "format/json_util.h"
#include "tokenizer/token_table.h"

namespace sluice::gguf {
namespace {

namespace fs = std::filesystem;

std::string basename_of(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

bool same(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

}  // namespace

void refuse(const std::string& arch, const std::string& what) {
  fail("cannot export to GGUF: llama.cpp's ", arch, " cannot express ", what);
}

void general_keys(Writer& w, const std::string& arch, const std::string& model_dir, uint32_t file_type) {
  w.add_string("general.architecture", arch);
  w.add_string("general.name", basename_of(model_dir));
  w.add_u32("general.file_type", file_type);
  w.add_u32("general.quantization_version", 2);
}

void rope_keys(Writer& w, const std::string& arch, const format::RopeParams& p, YarnScale scale,
               const ExportOptions& opt) {
  const std::string a = arch + ".";
  if (p.yarn && p.factor > 1.0) {
    if (p.beta_fast != 32.0 || p.beta_slow != 1.0)
      refuse(arch, cat("YaRN beta_fast ", p.beta_fast, " / beta_slow ", p.beta_slow,
                       " (its graph reads no YaRN beta keys and always uses 32 / 1)"));
    // cos/sin magnitude and the extra factor on attention scores, both sides.
    const double plain = format::yarn_get_mscale(p.factor, 1.0);
    const double ours_rope = format::rope_attention_factor(p);
    double ours_attn = 1.0, theirs_rope = plain, theirs_attn = 1.0;
    if (scale == YarnScale::DeepSeek2) {
      const double all = p.mscale_all_dim > 0 ? format::yarn_get_mscale(p.factor, p.mscale_all_dim) : 0.0;
      ours_attn = all > 0 ? all * all : 1.0;
      theirs_rope = all > 0 ? 1.0 : plain;
      theirs_attn = all > 0 ? all * all : plain * plain;
    }
    if (!same(ours_rope, theirs_rope) || !same(ours_attn, theirs_attn))
      refuse(arch, cat("YaRN with mscale ", p.mscale, ", mscale_all_dim ", p.mscale_all_dim, " and attention_factor ",
                       p.attention_factor, ": it scales cos/sin by ", theirs_rope, " and attention scores by ",
                       theirs_attn, ", transformers by ", ours_rope, " and ", ours_attn));
    if (!p.truncate && opt.note)
      opt.note(cat("note: ", arch, ": llama.cpp floors/ceils YaRN's correction range, this config has truncate: false "
                   "(as every GGUF llama.cpp's converter writes for it); a few rotary frequencies blend slightly "
                   "differently"));
  }
  w.add_f32(a + "rope.freq_base", float(p.theta));
  if (!p.yarn) return;
  w.add_string(a + "rope.scaling.type", "yarn");
  w.add_f32(a + "rope.scaling.factor", float(p.factor));
  w.add_u32(a + "rope.scaling.original_context_length", uint32_t(p.original_max_position));
  w.add_f32(a + "rope.scaling.yarn_beta_fast", float(p.beta_fast));
  w.add_f32(a + "rope.scaling.yarn_beta_slow", float(p.beta_slow));
  // [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: the converter writes 0.1 x mscale_all_dim, the loader divides.
  if (scale == YarnScale::DeepSeek2 && p.mscale_all_dim > 0)
    w.add_f32(a + "rope.scaling.yarn_log_multiplier", float(0.1 * p.mscale_all_dim));
}

void tokenizer_keys_from_config(Writer& w, const std::string& arch, const std::string& model_dir, int64_t vocab_size,
                                int32_t bos_token_id, const std::vector<int32_t>& eos_token_ids) {
  tokenizer_keys(w, arch, model_dir, vocab_size, bos_token_id >= 0 ? std::optional<int32_t>(bos_token_id) : std::nullopt,
                 eos_token_ids.empty() ? std::nullopt : std::optional<int32_t>(eos_token_ids[0]));
}

void gqa_moe_keys(Writer& w, const std::string& arch, const GqaMoeShape& s) {
  const std::string a = arch + ".";
  w.add_u32(a + "block_count", uint32_t(s.layers));
  w.add_u32(a + "context_length", uint32_t(s.context));
  w.add_u32(a + "embedding_length", uint32_t(s.hidden));
  w.add_u32(a + "feed_forward_length", uint32_t(s.feed_forward));
  w.add_u32(a + "attention.head_count", uint32_t(s.heads));
  w.add_u32(a + "attention.head_count_kv", uint32_t(s.kv_heads));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", s.rms_norm_eps);
  w.add_u32(a + "expert_count", uint32_t(s.experts));
  w.add_u32(a + "expert_used_count", uint32_t(s.experts_used));
  w.add_u32(a + "attention.key_length", uint32_t(s.head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(s.head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(s.expert_feed_forward));
}

void tokenizer_keys(Writer& w, const std::string& arch, const std::string& model_dir, int64_t vocab_size,
                    std::optional<int32_t> config_bos, std::optional<int32_t> config_eos,
                    std::optional<int32_t> eos_first) {
  auto tok = tokenizer::load_tokenizer(model_dir);
  if (!tok) {
    if (!w.has_key(arch + ".vocab_size")) w.add_u32(arch + ".vocab_size", uint32_t(vocab_size));
    w.add_string("tokenizer.ggml.model", "none");
    return;
  }
  SLUICE_CHECK(tok->describe().rfind("tiktoken", 0) == 0, model_dir, ": tokenizer ", tok->describe(),
               " cannot be exported yet (a tiktoken vocabulary, or none, can): llama.cpp names the pre-tokenizer of a "
               "tokenizer.json by its converter's hash of the tokenization");
  const GgufVocab vocab = build_vocab(*tok, vocab_size);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "kimi-k2");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  // Special ids as gguf's SpecialVocab finds them (tokenizer_config.json's spellings), then config.json's.
  const std::string tc_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  nlohmann::json tcfg = fs::exists(tc_path) ? format::read_json_file(tc_path) : nlohmann::json::object();
  auto special_of = [&](const char* field) -> std::optional<int32_t> {
    if (!tcfg.is_object() || !tcfg.contains(field)) return std::nullopt;
    const nlohmann::json& v = tcfg[field];
    std::string s = v.is_string() ? v.get<std::string>()
                    : v.is_object() && v.contains("content") && v["content"].is_string() ? v["content"].get<std::string>()
                                                                                        : std::string();
    return s.empty() ? std::nullopt : tok->special_id(s);
  };
  std::optional<int32_t> bos = special_of("bos_token"), eos = eos_first ? eos_first : special_of("eos_token");
  if (!bos) bos = config_bos;
  if (!eos) eos = config_eos;
  SLUICE_CHECK(bos && eos, model_dir, ": cannot tell the bos/eos token ids (tokenizer_config.json or config.json)");
  w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(*bos));
  w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(*eos));
  if (auto unk = special_of("unk_token")) w.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(*unk));
  if (auto pad = special_of("pad_token")) w.add_u32("tokenizer.ggml.padding_token_id", uint32_t(*pad));
  for (const char* f : {"add_bos_token", "add_eos_token"})
    if (tcfg.is_object() && tcfg.contains(f) && tcfg[f].is_boolean())
      w.add_bool(cat("tokenizer.ggml.", f), tcfg[f].get<bool>());
  if (tcfg.is_object() && tcfg.contains("chat_template") && tcfg["chat_template"].is_string()) {
    w.add_string("tokenizer.chat_template", tcfg["chat_template"].get<std::string>());
  } else if (fs::exists(fs::path(model_dir) / "chat_template.jinja")) {
    w.add_string("tokenizer.chat_template",
                 tokenizer::read_whole_file((fs::path(model_dir) / "chat_template.jinja").string()));
  }
}

ExportSummary write_file(const Writer& w, const std::string& arch, const std::string& out, const ExportOptions& opt) {
  ExportSummary sum{arch, w.tensor_count(), w.key_count(), w.data_bytes()};
  w.write(out, opt.progress);
  return sum;
}

}  // namespace sluice::gguf
