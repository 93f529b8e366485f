// sluice export-gguf of the issue-17 architectures (deepseek2, qwen3moe, gpt-oss), read back by the
// independent reader (gguf_test_reader.h): keys and their types as llama.cpp's converter writes
// them, ggml shapes, BF16 bytes unchanged, FP8 widened to value x block scale and INT4 to
// bf16(q·s) (computed here from the formats' definitions), gpt-oss's MXFP4 gate/up taken apart to
// what sluice's own product reads from the interleaved rows, and every refusal the committed
// fixtures meet (their configs use features llama.cpp's graphs cannot express).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "export/export_common.h"
#include "export/export_gguf.h"
#include "format/json_util.h"
#include "format/safetensors.h"
#include "gguf_test_reader.h"
#include "model/tensor_list.h"
#include "model/tiny_checkpoint.h"
#include "model_test_util.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace gguf_test;
using testing::TempDir;

const std::string kFixtures = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/";
constexpr int32_t kF32 = 0, kBF16 = 30, kMXFP4 = 39;

// A copy of fixture `name` in `dir` with `edit` applied to its config.json.
std::string edited_copy(const std::string& name, const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  fs::copy(kFixtures + name, dir, fs::copy_options::recursive);
  nlohmann::json c = format::read_json_file(dir + "/config.json");
  edit(c);
  std::ofstream(dir + "/config.json") << c.dump(2);
  return dir;
}
void llama_betas(nlohmann::json& c) {
  c["rope_scaling"]["beta_fast"] = 32.0;
  c["rope_scaling"]["beta_slow"] = 1.0;
}

std::string export_f32(const std::string& dir, const TempDir& tmp, const std::string& name) {
  const std::string out = tmp / name;
  gguf::export_gguf(dir, out, {.widen_to_f32 = true});
  return out;
}

template <typename T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * int64_t(sizeof(T)), sizeof(T));
  return v;
}

// DeepSeek-V3's FP8 dequantization: each e4m3 value times its 128x128 block's F32 scale.
std::vector<float> fp8_matrix(const format::TensorSet& ts, const std::string& name) {
  const format::TensorInfo& w = ts.get(name);
  const format::TensorInfo& s = ts.get(model::fp8_scale_name(name));
  EXPECT_EQ(w.dtype, DType::F8_E4M3) << name;
  const int64_t rows = w.shape[0], cols = w.shape[1], cb = (cols + 127) / 128;
  std::vector<float> m(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      m[size_t(r * cols + k)] = e4m3_to_f32(load<uint8_t>(w.data, r * cols + k)) * load<float>(s.data, (r / 128) * cb + k / 128);
  return m;
}

// compressed-tensors pack-quantized int4: code (q + 8) of element k in bits 4(k%8) of word k/8,
// value bf16(q x s) with s the BF16 scale of its 32 columns.
std::vector<float> int4_matrix(const format::TensorSet& ts, const std::string& base, int64_t rows, int64_t cols) {
  const format::TensorInfo& p = ts.get(base + "weight_packed");
  const format::TensorInfo& s = ts.get(base + "weight_scale");
  std::vector<float> m(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      const int q = int((load<uint32_t>(p.data, r * (cols / 8) + k / 8) >> (4 * (k % 8))) & 15) - 8;
      const float sc = bf16_to_f32(load<uint16_t>(s.data, r * (cols / 32) + k / 32));
      m[size_t(r * cols + k)] = bf16_to_f32(f32_to_bf16(float(q) * sc));
    }
  return m;
}

// GGUF tensor `name` (F32, stacked or not) from element `at` on equals `want`.
void expect_f32_values(const Gguf& g, const std::string& name, int64_t at, const std::vector<float>& want) {
  ASSERT_EQ(g.tensors.at(name).type, kF32) << name;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(f32_at(g, name, at + int64_t(i)), want[i]) << name << "[" << i << "]";
}

// ---- deepseek2 ---------------------------------------------------------------------------------
TEST(ExportGgufMoe, DeepSeekV3Fp8OnlyWidenedToBlockProducts) {
  TempDir tmp("gguf-moe");
  const std::string dir = kFixtures + "deepseek_v3_a";
  expect_refused(dir, tmp, "FP8 e4m3 weights (128x128 block scales) have no GGUF type in llama.cpp's deepseek2; export with --f32");
  const Gguf g = read_gguf(export_f32(dir, tmp, "ds.gguf"));
  check_layout(g);
  const std::string a = "deepseek2.";
  EXPECT_EQ(g.kv.at("general.architecture").s, "deepseek2");
  EXPECT_EQ(g.kv.at("general.file_type").u, 0u);  // ALL_F32
  for (auto [k, v] : std::vector<std::pair<const char*, uint64_t>>{
           {"block_count", 3}, {"context_length", 163840}, {"embedding_length", 160}, {"feed_forward_length", 192},
           {"attention.head_count", 4}, {"attention.head_count_kv", 1}, {"expert_count", 8}, {"expert_used_count", 2},
           {"expert_group_count", 4}, {"expert_group_used_count", 2}, {"expert_gating_func", 2},
           {"leading_dense_block_count", 1}, {"vocab_size", 384}, {"attention.q_lora_rank", 48},
           {"attention.kv_lora_rank", 40}, {"attention.key_length", 48}, {"attention.value_length", 40},
           {"attention.key_length_mla", 24}, {"attention.value_length_mla", 16}, {"expert_feed_forward_length", 144},
           {"expert_shared_count", 1}, {"rope.dimension_count", 8}, {"rope.scaling.original_context_length", 4096}}) {
    expect_key(g, a + k, 4);
    EXPECT_EQ(g.kv.at(a + k).u, v) << k;
  }
  for (auto [k, v] : std::vector<std::pair<const char*, float>>{
           {"expert_weights_scale", 2.5f}, {"rope.freq_base", 10000.0f}, {"rope.scaling.factor", 40.0f},
           {"rope.scaling.yarn_log_multiplier", 0.1f}, {"rope.scaling.yarn_beta_fast", 32.0f},
           {"attention.layer_norm_rms_epsilon", 1e-6f}}) {
    expect_key(g, a + k, 6);
    EXPECT_EQ(g.kv.at(a + k).f, v) << k;
  }
  expect_key(g, a + "expert_weights_norm", 7);
  EXPECT_EQ(g.kv.at(a + "rope.scaling.type").s, "yarn");
  EXPECT_EQ(g.kv.at("tokenizer.ggml.model").s, "none");  // no tokenizer files: ids only
  EXPECT_EQ(g.kv.count("tokenizer.ggml.tokens"), 0u);

  expect_tensor(g, "token_embd.weight", {160, 384}, kF32);
  expect_tensor(g, "blk.0.attn_q_a.weight", {160, 48}, kF32);
  expect_tensor(g, "blk.0.attn_q_b.weight", {48, 4 * 24}, kF32);
  expect_tensor(g, "blk.0.attn_kv_a_mqa.weight", {160, 48}, kF32);
  expect_tensor(g, "blk.0.attn_k_b.weight", {16, 40, 4}, kF32);
  expect_tensor(g, "blk.0.attn_v_b.weight", {40, 16, 4}, kF32);
  expect_tensor(g, "blk.0.ffn_down.weight", {192, 160}, kF32);
  expect_tensor(g, "blk.1.ffn_gate_inp.weight", {160, 8}, kF32);
  expect_tensor(g, "blk.1.exp_probs_b.bias", {8}, kF32);
  expect_tensor(g, "blk.1.ffn_gate_exps.weight", {160, 144, 8}, kF32);
  expect_tensor(g, "blk.1.ffn_down_exps.weight", {144, 160, 8}, kF32);
  expect_tensor(g, "blk.2.ffn_up_shexp.weight", {160, 144}, kF32);
  EXPECT_EQ(g.tensors.size(), 3u + 3 * 10 + 3 + 2 * 8);  // exactly what the loader consumes

  const format::TensorSet ts = format::TensorSet::open_dir(dir);
  expect_widened(g, "token_embd.weight", ts, "model.embed_tokens.weight");
  expect_widened(g, "blk.1.ffn_gate_inp.weight", ts, "model.layers.1.mlp.gate.weight");
  expect_widened(g, "blk.1.exp_probs_b.bias", ts, "model.layers.1.mlp.gate.e_score_correction_bias");
  expect_f32_values(g, "blk.0.attn_q_b.weight", 0, fp8_matrix(ts, "model.layers.0.self_attn.q_b_proj.weight"));
  expect_f32_values(g, "blk.0.ffn_down.weight", 0, fp8_matrix(ts, "model.layers.0.mlp.down_proj.weight"));
  expect_f32_values(g, "blk.2.ffn_down_shexp.weight", 0,
                    fp8_matrix(ts, "model.layers.2.mlp.shared_experts.down_proj.weight"));
  for (int e : {0, 5, 7}) {
    const std::string x = "model.layers.2.mlp.experts." + std::to_string(e) + ".";
    expect_f32_values(g, "blk.2.ffn_gate_exps.weight", e * 144 * 160, fp8_matrix(ts, x + "gate_proj.weight"));
    expect_f32_values(g, "blk.2.ffn_down_exps.weight", e * 160 * 144, fp8_matrix(ts, x + "down_proj.weight"));
  }
  // k_b[h][r][d] = kv_b[h*(Dn+Dv) + d][r], v_b[h][v][r] = kv_b[h*(Dn+Dv) + Dn + v][r], widened.
  const std::vector<float> kvb = fp8_matrix(ts, "model.layers.1.self_attn.kv_b_proj.weight");
  const int64_t H = 4, Dn = 16, Dv = 16, R = 40;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t d = 0; d < Dn; ++d)
        ASSERT_EQ(f32_at(g, "blk.1.attn_k_b.weight", (h * R + r) * Dn + d), kvb[size_t((h * (Dn + Dv) + d) * R + r)]);
      for (int64_t v = 0; v < Dv; ++v)
        ASSERT_EQ(f32_at(g, "blk.1.attn_v_b.weight", (h * Dv + v) * R + r), kvb[size_t((h * (Dn + Dv) + Dn + v) * R + r)]);
    }
}

TEST(ExportGgufMoe, KimiK2Bf16BytesUnchanged) {
  TempDir tmp("gguf-moe");
  model::TinyMoeSpec s{.arch = "kimi_k2", .layers = 3, .q_lora = 0, .shared = 2, .norm_topk = false,
                       .routed_scaling = 2.827};
  model::write_tiny_moe_checkpoint(s, tmp / "m");
  const Gguf g = read_gguf(export_to(tmp / "m", tmp, "k2.gguf"));
  check_layout(g);
  const std::string a = "deepseek2.";
  EXPECT_EQ(g.kv.at("general.file_type").u, 32u);  // MOSTLY_BF16
  EXPECT_EQ(g.kv.at(a + "attention.q_lora_rank").u, 0u);  // plain q_proj: attn_q
  EXPECT_EQ(g.kv.count(a + "expert_weights_norm"), 0u);   // norm_topk_prob false
  EXPECT_EQ(g.kv.at(a + "expert_weights_scale").f, 2.827f);
  EXPECT_EQ(g.kv.at(a + "expert_group_count").u, 1u);
  EXPECT_EQ(g.kv.at(a + "expert_shared_count").u, 2u);
  const int64_t E = s.hidden, F = s.moe_inter, X = s.experts;
  expect_tensor(g, "blk.0.attn_q.weight", {E, s.heads * (s.nope + s.rope)}, kBF16);
  expect_tensor(g, "blk.1.ffn_up_exps.weight", {E, F, X}, kBF16);
  expect_tensor(g, "blk.1.ffn_gate_shexp.weight", {E, 2 * F}, kBF16);
  EXPECT_EQ(g.tensors.count("blk.0.attn_q_a.weight"), 0u);
  EXPECT_EQ(g.tensors.size(), 3u + 3 * 8 + 3 + 2 * 8);
  const format::TensorSet ts = format::TensorSet::open_dir(tmp / "m");
  expect_same_bytes(g, "token_embd.weight", ts, "model.embed_tokens.weight");
  expect_same_bytes(g, "output.weight", ts, "lm_head.weight");
  expect_same_bytes(g, "blk.0.attn_q.weight", ts, "model.layers.0.self_attn.q_proj.weight");
  expect_same_bytes(g, "blk.2.attn_output.weight", ts, "model.layers.2.self_attn.o_proj.weight");
  expect_same_bytes(g, "blk.2.ffn_down_shexp.weight", ts, "model.layers.2.mlp.shared_experts.down_proj.weight");
  expect_widened(g, "blk.1.attn_kv_a_norm.weight", ts, "model.layers.1.self_attn.kv_a_layernorm.weight");
  const uint8_t* at = g.data("blk.1.ffn_up_exps.weight");
  for (int64_t e = 0; e < X; ++e) {
    const format::TensorInfo& t = ts.get("model.layers.1.mlp.experts." + std::to_string(e) + ".up_proj.weight");
    ASSERT_EQ(std::memcmp(at, t.data, t.nbytes), 0) << e;
    at += t.nbytes;
  }
  const format::TensorInfo& kvb = ts.get("model.layers.2.self_attn.kv_b_proj.weight");
  const auto* kb = reinterpret_cast<const uint16_t*>(g.data("blk.2.attn_k_b.weight"));
  const int64_t H = s.heads, Dn = s.nope, Dv = s.v_dim, R = s.kv_lora;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t d = 0; d < Dn; ++d) ASSERT_EQ(kb[(h * R + r) * Dn + d], load<uint16_t>(kvb.data, (h * (Dn + Dv) + d) * R + r));
}

TEST(ExportGgufMoe, KimiK2Int4OnlyWidenedToBf16Products) {
  TempDir tmp("gguf-moe");
  model::TinyMoeSpec s{.arch = "kimi_k2", .layers = 2, .int4 = true};
  model::write_tiny_moe_checkpoint(s, tmp / "m");
  expect_refused(tmp / "m", tmp, "INT4 routed experts (compressed-tensors pack-quantized, group 32) have no GGUF type");
  const Gguf g = read_gguf(export_f32(tmp / "m", tmp, "int4.gguf"));
  check_layout(g);
  const format::TensorSet ts = format::TensorSet::open_dir(tmp / "m");
  const int64_t E = s.hidden, F = s.moe_inter;
  for (int e : {0, 9, int(s.experts) - 1}) {
    const std::string x = "model.layers.1.mlp.experts." + std::to_string(e) + ".";
    expect_f32_values(g, "blk.1.ffn_gate_exps.weight", e * F * E, int4_matrix(ts, x + "gate_proj.", F, E));
    expect_f32_values(g, "blk.1.ffn_down_exps.weight", e * E * F, int4_matrix(ts, x + "down_proj.", E, F));
  }
  expect_widened(g, "blk.1.ffn_up_shexp.weight", ts, "model.layers.1.mlp.shared_experts.up_proj.weight");
}

TEST(ExportGgufMoe, DeepSeekRefusals) {
  TempDir tmp("gguf-moe");
  expect_refused(kFixtures + "kimi_k2_b", tmp,
                 "llama.cpp's deepseek2 cannot express YaRN beta_fast 1 / beta_slow 1 (its graph reads no YaRN beta keys");
  expect_refused(edited_copy("kimi_k2_b", tmp / "k2b", llama_betas), tmp,
                 "llama.cpp's deepseek2 cannot express YaRN with mscale 1, mscale_all_dim 0.707");
  expect_refused(kFixtures + "kimi_k2_int4", tmp, "INT4 routed experts");
  model::TinyMoeSpec s{.arch = "deepseek_v3", .layers = 2};
  model::write_tiny_moe_checkpoint(s, tmp / "ni");
  nlohmann::json c = format::read_json_file(tmp / "ni/config.json");
  c["rope_interleave"] = false;
  std::ofstream(tmp / "ni/config.json") << c.dump(2);
  expect_refused(tmp / "ni", tmp, "rope_interleave false");
}

// ---- qwen3moe ----------------------------------------------------------------------------------
TEST(ExportGgufMoe, Qwen3MoeLayoutAndBytes) {
  TempDir tmp("gguf-moe");
  model::TinyMoeSpec s{.arch = "qwen3_moe", .layers = 2, .dense_layers = 0};
  model::write_tiny_moe_checkpoint(s, tmp / "m");
  const Gguf g = read_gguf(export_to(tmp / "m", tmp, "q.gguf"));
  check_layout(g);
  const std::string a = "qwen3moe.";
  EXPECT_EQ(g.kv.at("general.architecture").s, "qwen3moe");
  for (auto [k, v] : std::vector<std::pair<const char*, uint64_t>>{
           {"block_count", 2}, {"embedding_length", 64}, {"attention.head_count", 4}, {"attention.head_count_kv", 2},
           {"attention.key_length", 16}, {"attention.value_length", 16}, {"expert_count", 16}, {"expert_used_count", 4},
           {"expert_feed_forward_length", 64}, {"vocab_size", 512}}) {
    expect_key(g, a + k, 4);
    EXPECT_EQ(g.kv.at(a + k).u, v) << k;
  }
  EXPECT_EQ(g.kv.count(a + "rope.scaling.type"), 0u);
  EXPECT_EQ(g.kv.count(a + "expert_gating_func"), 0u);  // its graph hard-codes softmax + renormalisation
  expect_tensor(g, "blk.1.ffn_gate_exps.weight", {64, 64, 16}, kBF16);
  expect_tensor(g, "blk.1.ffn_down_exps.weight", {64, 64, 16}, kBF16);
  expect_tensor(g, "blk.0.attn_q_norm.weight", {16}, kF32);
  EXPECT_EQ(g.tensors.size(), 3u + 2 * 12);
  const format::TensorSet ts = format::TensorSet::open_dir(tmp / "m");
  expect_same_bytes(g, "blk.0.attn_k.weight", ts, "model.layers.0.self_attn.k_proj.weight");
  expect_widened(g, "blk.0.attn_k_norm.weight", ts, "model.layers.0.self_attn.k_norm.weight");
  expect_widened(g, "blk.1.ffn_gate_inp.weight", ts, "model.layers.1.mlp.gate.weight");
  const uint8_t* at = g.data("blk.1.ffn_down_exps.weight");
  for (int64_t e = 0; e < s.experts; ++e) {
    const format::TensorInfo& t = ts.get("model.layers.1.mlp.experts." + std::to_string(e) + ".down_proj.weight");
    ASSERT_EQ(std::memcmp(at, t.data, t.nbytes), 0) << e;
    at += t.nbytes;
  }

  expect_refused(kFixtures + "qwen3_moe_a", tmp, "llama.cpp's qwen3moe cannot express a dense MLP on layer 0");
  expect_refused(kFixtures + "qwen3_moe_b", tmp, "llama.cpp's qwen3moe cannot express a dense MLP on layer 0");
  s.norm_topk = false;
  model::write_tiny_moe_checkpoint(s, tmp / "nt");
  expect_refused(tmp / "nt", tmp, "norm_topk_prob false");
}

// ---- gpt-oss -----------------------------------------------------------------------------------
TEST(ExportGgufMoe, GptOssExpertsTakenApart) {
  TempDir tmp("gguf-moe");
  const std::string dir = kFixtures + "gpt_oss_a";
  std::vector<std::string> notes;
  const std::string out = tmp / "o.gguf";
  gguf::export_gguf(dir, out, {.note = [&](const std::string& n) { notes.push_back(n); }});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("truncate: false"), std::string::npos) << notes[0];
  const Gguf g = read_gguf(out);
  check_layout(g);
  const std::string a = "gpt-oss.";
  EXPECT_EQ(g.kv.at("general.file_type").u, 38u);  // MOSTLY_MXFP4_MOE
  EXPECT_EQ(g.kv.at(a + "attention.sliding_window").u, 4u);
  EXPECT_EQ(g.kv.count(a + "attention.sliding_window_pattern"), 0u);  // its default: even layers
  EXPECT_EQ(g.kv.at(a + "expert_feed_forward_length").u, 64u);
  EXPECT_EQ(g.kv.at(a + "rope.scaling.factor").f, 32.0f);
  EXPECT_EQ(g.kv.at(a + "rope.freq_base").f, 150000.0f);
  const int64_t E = 64, I = 64, X = 8, Hh = 4;
  expect_tensor(g, "blk.0.ffn_gate_exps.weight", {E, I, X}, kMXFP4);
  expect_tensor(g, "blk.0.ffn_up_exps.weight", {E, I, X}, kMXFP4);
  expect_tensor(g, "blk.0.ffn_down_exps.weight", {I, E, X}, kMXFP4);
  expect_tensor(g, "blk.0.ffn_up_exps.bias", {I, X}, kF32);
  expect_tensor(g, "blk.0.attn_sinks.weight", {Hh}, kF32);
  expect_tensor(g, "blk.0.post_attention_norm.weight", {E}, kF32);
  EXPECT_EQ(g.tensors.size(), 3u + 3 * 19);
  const format::TensorSet ts = format::TensorSet::open_dir(dir);
  for (int l : {0, 2}) {
    const std::string b = "blk." + std::to_string(l) + ".", m = "model.layers." + std::to_string(l) + ".";
    expect_widened(g, b + "attn_sinks.weight", ts, m + "self_attn.sinks");
    expect_widened(g, b + "attn_output.bias", ts, m + "self_attn.o_proj.bias");
    expect_widened(g, b + "ffn_gate_inp.bias", ts, m + "mlp.router.bias");
    expect_same_bytes(g, b + "attn_q.weight", ts, m + "self_attn.q_proj.weight");
    const format::TensorInfo& blocks = ts.get(m + "mlp.experts.gate_up_proj_blocks");
    const format::TensorInfo& scales = ts.get(m + "mlp.experts.gate_up_proj_scales");
    const format::TensorInfo& bias = ts.get(m + "mlp.experts.gate_up_proj_bias");
    for (int64_t e : {0, 3, 7}) {
      // The interleaved [2I, E] matrix as sluice reads it: gate unit i is row 2i, up unit i row 2i + 1.
      const std::vector<float> gu = sluice_mxfp4_matrix(blocks.data + e * 2 * I * E / 2, scales.data + e * 2 * I * E / 32,
                                                        2 * I, E);
      for (int part = 0; part < 2; ++part) {
        const std::string name = b + (part == 0 ? "ffn_gate_exps" : "ffn_up_exps");
        for (int64_t i = 0; i < I; ++i) {
          const std::vector<float> row = ggml_mxfp4_row(g.data(name + ".weight") + (e * I + i) * (E / 32 * 17), E);
          for (int64_t k = 0; k < E; ++k)
            ASSERT_EQ(row[size_t(k)], gu[size_t((2 * i + part) * E + k)]) << name << " expert " << e << " [" << i << "," << k << "]";
          ASSERT_EQ(f32_at(g, name + ".bias", e * I + i), bf16_to_f32(load<uint16_t>(bias.data, e * 2 * I + 2 * i + part)));
        }
      }
    }
  }
  // gpt_oss_b's layers (sliding, full, full, sliding) need the explicit pattern; its YaRN betas
  // (16 / 2) are refused, so the copy takes llama.cpp's 32 / 1.
  expect_refused(kFixtures + "gpt_oss_b", tmp, "llama.cpp's gpt-oss cannot express YaRN beta_fast 16 / beta_slow 2");
  const Gguf gb = read_gguf(export_to(edited_copy("gpt_oss_b", tmp / "b", llama_betas), tmp, "b.gguf"));
  expect_key(gb, a + "attention.sliding_window_pattern", 9);
  EXPECT_EQ(gb.kv.at(a + "attention.sliding_window_pattern").elem, 7u);
  EXPECT_EQ(gb.kv.at(a + "attention.sliding_window_pattern").ints, (std::vector<int64_t>{1, 0, 0, 1}));
}

// ---- the YaRN check ----------------------------------------------------------------------------
TEST(ExportGgufMoe, YarnScalesMustMatchLlamaCpps) {
  using gguf::YarnScale;
  auto yarn = [](double ms, double all) {
    format::RopeParams p;
    p.yarn = true;
    p.factor = 40;
    p.original_max_position = 4096;
    p.mscale = ms;
    p.mscale_all_dim = all;
    return p;
  };
  auto check = [](const format::RopeParams& p, YarnScale s, std::vector<std::string>* notes = nullptr) {
    gguf::Writer w;
    gguf::ExportOptions opt;
    if (notes) opt.note = [notes](const std::string& n) { notes->push_back(n); };
    gguf::rope_keys(w, "arch", p, s, opt);
    return w;
  };
  auto refused = [&](const format::RopeParams& p, YarnScale s, const std::string& what) {
    try {
      check(p, s);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  // deepseek2: cos/sin 1 and scores mscale(mscale_all_dim)^2 equal transformers' only when mscale == mscale_all_dim.
  EXPECT_TRUE(check(yarn(1, 1), YarnScale::DeepSeek2).has_key("arch.rope.scaling.yarn_log_multiplier"));
  EXPECT_NO_THROW(check(yarn(0.707, 0.707), YarnScale::DeepSeek2));
  refused(yarn(1, 0.707), YarnScale::DeepSeek2, "YaRN with mscale 1, mscale_all_dim 0.707");
  refused(yarn(0, 0), YarnScale::DeepSeek2, "scales cos/sin by 1.36889");
  // qwen3moe / gpt-oss: cos/sin mscale(factor, 1), plain scores.
  EXPECT_NO_THROW(check(yarn(0, 0), YarnScale::Plain));
  EXPECT_FALSE(check(yarn(0, 0), YarnScale::Plain).has_key("arch.rope.scaling.yarn_log_multiplier"));
  refused(yarn(1, 1), YarnScale::Plain, "transformers by 1 and 1");
  format::RopeParams af = yarn(0, 0);
  af.attention_factor = 2.0;
  refused(af, YarnScale::Plain, "attention_factor 2");
  format::RopeParams beta = yarn(0, 0);
  beta.beta_fast = 16;
  refused(beta, YarnScale::Plain, "YaRN beta_fast 16 / beta_slow 1");
  beta.factor = 1.0;  // no scaling: the ramp blends equal frequencies
  EXPECT_NO_THROW(check(beta, YarnScale::Plain));
  std::vector<std::string> notes;
  format::RopeParams untruncated = yarn(0, 0);
  untruncated.truncate = false;
  check(untruncated, YarnScale::Plain, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("floors/ceils YaRN's correction range"), std::string::npos);
  EXPECT_FALSE(check(format::RopeParams{}, YarnScale::Plain).has_key("arch.rope.scaling.type"));
}

}  // namespace
}  // namespace sluice
