// What every architecture's GGUF mapping shares: the one-line refusal, the general.* keys, RoPE
// keys with the check that llama.cpp's RoPE (and, for deepseek2, its YaRN attention scale) equals
// what sluice computes from the same config, the tokenizer arrays, and writing the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "export/export_gguf.h"
#include "export/gguf_writer.h"
#include "format/rope_params.h"
#include "tokenizer/tokenizer.h"

namespace sluice::gguf {

// llama_ftype values (general.file_type, display only).
inline constexpr uint32_t kFileAllF32 = 0, kFileMostlyBF16 = 32, kFileMostlyMxfp4Moe = 38;
// llama_expert_gating_func_type.
inline constexpr uint32_t kGatingSoftmax = 1, kGatingSigmoid = 2;

// Throws "cannot export to GGUF: llama.cpp's ARCH cannot express WHAT".
[[noreturn]] void refuse(const std::string& arch, const std::string& what);

// general.architecture, general.name (the directory's name), general.file_type and
// general.quantization_version.
void general_keys(Writer& w, const std::string& arch, const std::string& model_dir, uint32_t file_type);

// How an architecture's llama.cpp graph scales attention under YaRN.
enum class YarnScale {
  Plain,     // cos/sin by yarn_get_mscale(factor, 1), attention by 1/sqrt(head_dim) (qwen3moe, gpt-oss)
  DeepSeek2, // from rope.scaling.yarn_log_multiplier: cos/sin by 1 and attention by
             // yarn_get_mscale(factor, mscale_all_dim)^2 (by yarn_get_mscale(factor, 1)^2 without it)
};

// rope.freq_base and, under YaRN, the rope.scaling keys llama.cpp's converter writes (type, factor,
// original context, beta_fast/slow, and for DeepSeek2 the yarn_log_multiplier). Refuses what the
// graph computes differently from transformers (and sluice): beta_fast/beta_slow other than 32/1,
// which these graphs never read; an attention_factor; mscale pairs whose magnitudes the graph does
// not reproduce. An untruncated correction range (gpt-oss's truncate: false) is written with a note:
// llama.cpp always floors/ceils it, as in every GGUF its converter writes for such a model, which
// moves the blend of a few rotary frequencies by a fraction of one dimension's ramp step.
void rope_keys(Writer& w, const std::string& arch, const format::RopeParams& p, YarnScale scale,
               const ExportOptions& opt);

// The tokenizer: a tiktoken vocabulary (Kimi's, as llama.cpp's kimi converters write it: model
// gpt2, pre kimi-k2, tokens, types, merges rebuilt from the ranks, special ids, add_bos/add_eos,
// chat template); "none" with ARCH.vocab_size for a directory without tokenizer files (what the
// converter's _set_vocab_none writes; llama.cpp then has vocab_size dummy tokens). bos/eos: ids
// from tokenizer_config.json's spellings, else `config_bos`/`config_eos`; `eos_first`, when set,
// wins (K3's converter takes config.json's eos, kimi-linear's the tokenizer's [EOS]). Throws for a
// tokenizer.json vocabulary (not carried over yet).
void tokenizer_keys(Writer& w, const std::string& arch, const std::string& model_dir, int64_t vocab_size,
                    std::optional<int32_t> config_bos, std::optional<int32_t> config_eos,
                    std::optional<int32_t> eos_first = std::nullopt);

// tokenizer_keys with config.json's ids as the Hugging Face configs give them: bos -1 when absent,
// eos a list (the first is the one a GGUF carries).
void tokenizer_keys_from_config(Writer& w, const std::string& arch, const std::string& model_dir, int64_t vocab_size,
                                int32_t bos_token_id, const std::vector<int32_t>& eos_token_ids);

// The keys llama.cpp's TextModel writes for a grouped-query MoE model (qwen3moe, gpt-oss):
// block_count, context_length, embedding/feed_forward_length, head counts, the norm epsilon,
// expert counts, key/value lengths, expert_feed_forward_length; RoPE keys are the caller's.
struct GqaMoeShape {
  int64_t layers, context, hidden, feed_forward, heads, kv_heads, head_dim, experts, experts_used, expert_feed_forward;
  float rms_norm_eps;
};
void gqa_moe_keys(Writer& w, const std::string& arch, const GqaMoeShape& s);

// Writes the file (FILE.tmp, fsync, rename) and returns its summary.
ExportSummary write_file(const Writer& w, const std::string& arch, const std::string& out, const ExportOptions& opt);

}  // namespace sluice::gguf
