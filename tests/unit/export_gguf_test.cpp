// sluice export-gguf of the Kimi architectures: the written file parsed back by a small reader of
// its own (gguf_test_reader.h: header, alignment, key types, tensor infos and offsets), the tensors checked against the checkpoint (BF16/F32 bytes
// unchanged, MXFP4 experts dequantising in ggml's nibble order to what sluice's own MXFP4 product
// reads, derived tensors as llama.cpp's converter derives them), the tokenizer arrays against
// sluice's tokenizer, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/dtype.h"
#include "core/error.h"
#include "export/export_gguf.h"
#include "export/gguf_vocab.h"
#include "model/arch/kimi_config.h"
#include "format/safetensors.h"
#include "gguf_test_reader.h"
#include "device/cpu/kernels.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace gguf_test;
using testing::TempDir;

const std::string kDefaultModel = std::string(SLUICE_SOURCE_DIR) + "/models/default/target";

// ---- the default model (kimi_k3, MXFP4 experts) ---------------------------------------------
TEST(ExportGguf, DefaultModelHeaderKeysAndShapes) {
  TempDir tmp("gguf");
  const Gguf g = read_gguf(export_to(kDefaultModel, tmp, "k3.gguf"));
  check_layout(g);
  const model::KimiConfig c = model::load_kimi_config(kDefaultModel);
  const std::string a = "kimi-k3.";
  EXPECT_EQ(g.kv.at("general.architecture").s, "kimi-k3");
  EXPECT_EQ(g.kv.at("general.file_type").u, 38u);  // MOSTLY_MXFP4_MOE
  for (const char* k : {"block_count", "context_length", "embedding_length", "feed_forward_length", "vocab_size",
                        "attention.head_count", "expert_count", "expert_used_count", "expert_gating_func",
                        "ssm.conv_kernel", "kda.head_dim", "attention.q_lora_rank", "attention.kv_lora_rank",
                        "rope.dimension_count", "attention.key_length", "attention.value_length",
                        "attention.key_length_mla", "attention.value_length_mla", "expert_feed_forward_length",
                        "expert_shared_count", "leading_dense_block_count", "expert_latent_length",
                        "attn_res.block_size"})
    expect_key(g, a + k, 4);
  for (const char* k : {"attention.layer_norm_rms_epsilon", "kda.gate_lower_bound", "expert_weights_scale",
                        "activation.situ_beta", "activation.situ_linear_beta"})
    expect_key(g, a + k, 6);
  expect_key(g, a + "expert_weights_norm", 7);
  EXPECT_EQ(g.kv.at(a + "block_count").u, uint64_t(c.num_layers));
  EXPECT_EQ(g.kv.at(a + "attention.key_length_mla").u, uint64_t(c.qk_nope_head_dim + c.qk_rope_head_dim));
  EXPECT_EQ(g.kv.at(a + "expert_latent_length").u, uint64_t(c.routed_expert_hidden_size));
  EXPECT_EQ(g.kv.at(a + "kda.gate_lower_bound").f, -5.0f);
  EXPECT_EQ(g.kv.at(a + "activation.situ_linear_beta").f, 25.0f);
  expect_key(g, a + "attention.head_count_kv", 9);
  EXPECT_EQ(g.kv.at(a + "attention.head_count_kv").elem, 5u);
  EXPECT_EQ(g.kv.at(a + "attention.head_count_kv").ints, (std::vector<int64_t>{0, 0, 0, 1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(g.kv.at("tokenizer.ggml.model").s, "gpt2");
  EXPECT_EQ(g.kv.at("tokenizer.ggml.pre").s, "kimi-k2");
  EXPECT_EQ(g.kv.at("tokenizer.ggml.token_type").elem, 5u);
  EXPECT_EQ(g.kv.at("tokenizer.ggml.tokens").elem, 8u);
  expect_key(g, "tokenizer.ggml.bos_token_id", 4);
  EXPECT_EQ(g.kv.at("tokenizer.ggml.bos_token_id").u, 4096u);
  EXPECT_EQ(g.kv.at("tokenizer.ggml.eos_token_id").u, uint64_t(c.eos_token_id));  // 4098, <|end_of_msg|>

  const int64_t E = c.hidden_size, V = c.vocab_size, H = c.num_heads, Dk = c.kda_head_dim, P = c.kda_dim();
  const int64_t R = c.kv_lora_rank, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim, Dv = c.v_head_dim;
  const int64_t L = c.routed_expert_hidden_size, Fe = c.moe_intermediate_size, X = c.num_experts;
  expect_tensor(g, "token_embd.weight", {E, V}, 30);
  expect_tensor(g, "output.weight", {E, V}, 30);
  expect_tensor(g, "output_norm.weight", {E}, 0);
  expect_tensor(g, "output_res_score.weight", {E}, 0);
  expect_tensor(g, "blk.0.ffn_gate.weight", {E, c.intermediate_size}, 30);
  expect_tensor(g, "blk.0.ffn_down.weight", {c.intermediate_size, E}, 30);
  expect_tensor(g, "blk.0.ssm_conv1d_q.weight", {c.conv_kernel, 1, P, 1}, 0);
  expect_tensor(g, "blk.0.ssm_a", {H}, 0);
  expect_tensor(g, "blk.0.ssm_g.weight", {E, P}, 30);
  expect_tensor(g, "blk.0.ssm_f_b.weight", {Dk, P}, 30);
  expect_tensor(g, "blk.0.ssm_norm.weight", {Dk}, 0);
  expect_tensor(g, "blk.3.attn_q_a.weight", {E, c.q_lora_rank}, 30);
  expect_tensor(g, "blk.3.attn_q_b.weight", {c.q_lora_rank, H * (Dn + Dr)}, 30);
  expect_tensor(g, "blk.3.attn_kv_a_mqa.weight", {E, R + Dr}, 30);
  expect_tensor(g, "blk.3.attn_k_b.weight", {Dn, R, H}, 30);
  expect_tensor(g, "blk.3.attn_v_b.weight", {R, Dv, H}, 30);
  expect_tensor(g, "blk.3.attn_gate.weight", {E, H * Dv}, 30);
  expect_tensor(g, "blk.3.attn_output.weight", {H * Dv, E}, 30);
  expect_tensor(g, "blk.1.ffn_gate_inp.weight", {E, X}, 0);
  expect_tensor(g, "blk.1.exp_probs_b.bias", {X}, 0);
  expect_tensor(g, "blk.1.ffn_gate_exps.weight", {L, Fe, X}, 39);
  expect_tensor(g, "blk.1.ffn_up_exps.weight", {L, Fe, X}, 39);
  expect_tensor(g, "blk.1.ffn_down_exps.weight", {Fe, L, X}, 39);
  expect_tensor(g, "blk.1.ffn_routed_down.weight", {E, L}, 30);
  expect_tensor(g, "blk.1.ffn_routed_up.weight", {L, E}, 30);
  expect_tensor(g, "blk.1.ffn_routed_norm.weight", {L}, 0);
  expect_tensor(g, "blk.1.ffn_gate_shexp.weight", {E, Fe * c.num_shared_experts}, 30);
  // Exactly the tensors llama.cpp's loader consumes (it refuses a file with more or fewer).
  size_t want = 4;
  for (int64_t l = 0; l < c.num_layers; ++l)
    want += 4 + (c.attn[size_t(l)] == model::AttnKind::KDA ? 14 : 9) + (c.mlp[size_t(l)] == model::MlpKind::Dense ? 3 : 11);
  EXPECT_EQ(g.tensors.size(), want);
}

TEST(ExportGguf, DefaultModelTensorValues) {
  TempDir tmp("gguf");
  const Gguf g = read_gguf(export_to(kDefaultModel, tmp, "k3.gguf"));
  const model::KimiConfig c = model::load_kimi_config(kDefaultModel);
  const format::TensorSet ts = format::TensorSet::open_dir(kDefaultModel);
  const std::string p = "language_model.model.";
  // BF16 and F32 tensors byte for byte.
  expect_same_bytes(g, "token_embd.weight", ts, "language_model.model.embed_tokens.weight");
  expect_same_bytes(g, "output.weight", ts, "language_model.lm_head.weight");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", s = p + "layers." + std::to_string(l) + ".";
    if (c.attn[size_t(l)] == model::AttnKind::KDA) {
      for (auto [to, from] : std::vector<std::pair<const char*, const char*>>{
               {"attn_q.weight", "q_proj.weight"}, {"attn_k.weight", "k_proj.weight"}, {"attn_v.weight", "v_proj.weight"},
               {"ssm_f_a.weight", "f_a_proj.weight"}, {"ssm_f_b.weight", "f_b_proj.weight"},
               {"ssm_beta.weight", "b_proj.weight"}, {"ssm_g.weight", "g_proj.weight"},
               {"attn_output.weight", "o_proj.weight"}, {"ssm_conv1d_q.weight", "q_conv1d.weight"},
               {"ssm_conv1d_v.weight", "v_conv1d.weight"}, {"ssm_dt.bias", "dt_bias"}})
        expect_same_bytes(g, b + to, ts, s + "self_attn." + from);
      expect_widened(g, b + "ssm_norm.weight", ts, s + "self_attn.o_norm.weight");
      // ssm_a = -exp(A_log) for the heads; K3's zero padding is dropped.
      const format::TensorInfo& a_log = ts.get(s + "self_attn.A_log");
      const float* got = reinterpret_cast<const float*>(g.data(b + "ssm_a"));
      for (int64_t h = 0; h < c.kda_heads; ++h)
        EXPECT_EQ(got[h], -std::exp(reinterpret_cast<const float*>(a_log.data)[h])) << b << h;
    } else {
      for (auto [to, from] : std::vector<std::pair<const char*, const char*>>{
               {"attn_q_a.weight", "q_a_proj.weight"}, {"attn_q_b.weight", "q_b_proj.weight"},
               {"attn_kv_a_mqa.weight", "kv_a_proj_with_mqa.weight"}, {"attn_gate.weight", "g_proj.weight"},
               {"attn_output.weight", "o_proj.weight"}})
        expect_same_bytes(g, b + to, ts, s + "self_attn." + from);
      expect_widened(g, b + "attn_kv_a_norm.weight", ts, s + "self_attn.kv_a_layernorm.weight");
      // k_b[h][r][d] = kv_b[h*(Dn+Dv) + d][r], v_b[h][v][r] = kv_b[h*(Dn+Dv) + Dn + v][r].
      const format::TensorInfo& kvb = ts.get(s + "self_attn.kv_b_proj.weight");
      const auto* src = reinterpret_cast<const uint16_t*>(kvb.data);
      const auto* kb = reinterpret_cast<const uint16_t*>(g.data(b + "attn_k_b.weight"));
      const auto* vb = reinterpret_cast<const uint16_t*>(g.data(b + "attn_v_b.weight"));
      const int64_t H = c.num_heads, Dn = c.qk_nope_head_dim, Dv = c.v_head_dim, R = c.kv_lora_rank;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t d = 0; d < Dn; ++d) ASSERT_EQ(kb[(h * R + r) * Dn + d], src[(h * (Dn + Dv) + d) * R + r]);
          for (int64_t v = 0; v < Dv; ++v) ASSERT_EQ(vb[(h * Dv + v) * R + r], src[(h * (Dn + Dv) + Dn + v) * R + r]);
        }
    }
    expect_widened(g, b + "attn_norm.weight", ts, s + "input_layernorm.weight");
    // AttnRes scores: norm x proj, elementwise, as llama.cpp fuses them.
    for (auto [to, norm, proj] : std::vector<std::tuple<const char*, const char*, const char*>>{
             {"attn_res_score.weight", "self_attention_res_norm.weight", "self_attention_res_proj.weight"},
             {"ffn_res_score.weight", "mlp_res_norm.weight", "mlp_res_proj.weight"}}) {
      const format::TensorInfo& n = ts.get(s + norm);
      const format::TensorInfo& pr = ts.get(s + proj);
      const float* got = reinterpret_cast<const float*>(g.data(b + to));
      for (int64_t i = 0; i < c.hidden_size; ++i) {
        auto val = [&](const format::TensorInfo& t) {
          return t.dtype == DType::F32 ? reinterpret_cast<const float*>(t.data)[i]
                                       : bf16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i]);
        };
        ASSERT_EQ(got[i], val(n) * val(pr)) << b << to << i;
      }
    }
    if (c.mlp[size_t(l)] == model::MlpKind::Dense) {
      expect_same_bytes(g, b + "ffn_gate.weight", ts, s + "mlp.gate_proj.weight");
      continue;
    }
    const std::string m = s + "block_sparse_moe.";
    expect_widened(g, b + "ffn_gate_inp.weight", ts, m + "gate.weight");
    expect_same_bytes(g, b + "exp_probs_b.bias", ts, m + "gate.e_score_correction_bias");
    expect_same_bytes(g, b + "ffn_routed_down.weight", ts, m + "routed_expert_down_proj.weight");
    expect_same_bytes(g, b + "ffn_down_shexp.weight", ts, m + "shared_experts.down_proj.weight");
  }
}

TEST(ExportGguf, Mxfp4ExpertsDequantizeToSluicesValues) {
  TempDir tmp("gguf");
  const Gguf g = read_gguf(export_to(kDefaultModel, tmp, "k3.gguf"));
  const model::KimiConfig c = model::load_kimi_config(kDefaultModel);
  ASSERT_TRUE(c.experts_mxfp4);
  const format::TensorSet ts = format::TensorSet::open_dir(kDefaultModel);
  const int64_t L = c.routed_expert_hidden_size, Fe = c.moe_intermediate_size;
  int checked = 0;
  for (int64_t l : {int64_t(1), c.num_layers - 1})
    for (int64_t e : {int64_t(0), int64_t(17), c.num_experts - 1})
      for (auto [which, name] : std::vector<std::pair<int, const char*>>{
               {1, "ffn_gate_exps.weight"}, {2, "ffn_down_exps.weight"}, {3, "ffn_up_exps.weight"}}) {
        const int64_t rows = which == 2 ? L : Fe, cols = which == 2 ? Fe : L;
        const std::string t = "language_model.model.layers." + std::to_string(l) + ".block_sparse_moe.experts." +
                               std::to_string(e) + ".w" + std::to_string(which) + ".";
        const std::vector<float> want = sluice_mxfp4_matrix(ts.get(t + "weight_packed"), ts.get(t + "weight_scale"), rows, cols);
        const std::string gn = "blk." + std::to_string(l) + "." + name;
        const uint8_t* base = g.data(gn) + e * rows * (cols / 32 * 17);
        size_t nonzero = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> got = ggml_mxfp4_row(base + r * (cols / 32 * 17), cols);
          for (int64_t k = 0; k < cols; ++k) {
            ASSERT_EQ(got[size_t(k)], want[size_t(r * cols + k)]) << gn << " expert " << e << " [" << r << "," << k << "]";
            nonzero += got[size_t(k)] != 0.0f;
          }
        }
        EXPECT_GT(nonzero, size_t(rows * cols / 4));  // a real matrix, not zeros on both sides
        ++checked;
      }
  EXPECT_EQ(checked, 18);
}

TEST(ExportGguf, Mxfp4RepackNibbleOrder) {
  // Codes 0..15 then 15..0 in sluice's pairwise layout; ggml puts element j in qs[j]'s low nibble
  // and element j + 16 in its high nibble.
  uint8_t codes[32], packed[16], scale = 130, out[17];
  for (int i = 0; i < 32; ++i) codes[i] = uint8_t(i < 16 ? i : 31 - i);
  for (int k = 0; k < 16; ++k) packed[k] = uint8_t(codes[2 * k] | (codes[2 * k + 1] << 4));
  gguf::repack_mxfp4_row(packed, &scale, 32, out);
  EXPECT_EQ(out[0], 130);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[1 + j] & 0x0F, codes[j]) << j;
    EXPECT_EQ(out[1 + j] >> 4, codes[j + 16]) << j;
  }
}

TEST(ExportGguf, TokenizerArraysMatchSluicesTokenizer) {
  TempDir tmp("gguf");
  const Gguf g = read_gguf(export_to(kDefaultModel, tmp, "k3.gguf"));
  auto tok = tokenizer::load_tokenizer(kDefaultModel);
  ASSERT_TRUE(tok);
  const auto& tokens = g.kv.at("tokenizer.ggml.tokens").strs;
  const auto& types = g.kv.at("tokenizer.ggml.token_type").ints;
  const auto& merges = g.kv.at("tokenizer.ggml.merges").strs;
  ASSERT_EQ(tokens.size(), 4352u);
  ASSERT_EQ(types.size(), tokens.size());
  std::map<std::string, int64_t> id_of;
  size_t normal = 0;
  for (size_t id = 0; id < tokens.size(); ++id) {
    id_of[tokens[id]] = int64_t(id);
    if (tok->is_special(int32_t(id))) {
      EXPECT_EQ(types[id], 3) << id;
      EXPECT_EQ(tokens[id], std::string(tok->token_bytes(int32_t(id)))) << id;
    } else {
      ASSERT_EQ(types[id], 1) << id;
      std::string bytes;
      ASSERT_TRUE(gguf::unicode_to_bytes(tokens[id], &bytes)) << id;
      EXPECT_EQ(bytes, std::string(tok->token_bytes(int32_t(id)))) << id;
      EXPECT_EQ(gguf::bytes_to_unicode(bytes), tokens[id]);
      ++normal;
    }
  }
  EXPECT_EQ(id_of.size(), tokens.size());  // every spelling once
  EXPECT_EQ(normal, 4096u);
  EXPECT_EQ(tokens[32], "\xC4\xA0");  // ' ' -> U+0120 (GPT-2 bytes_to_unicode)
  EXPECT_EQ(tokens[10], "\xC4\x8A");  // '\n' -> U+010A
  EXPECT_EQ(tokens[4096], "[BOS]");
  // Each merge joins two lower-ranked tokens into a token, in rank order.
  ASSERT_GT(merges.size(), 3000u);
  int64_t last = -1;
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    ASSERT_TRUE(id_of.count(left) && id_of.count(right) && id_of.count(left + right)) << m;
    const int64_t rank = id_of[left + right];
    EXPECT_LT(id_of[left], rank) << m;
    EXPECT_LT(id_of[right], rank) << m;
    EXPECT_GT(rank, last) << m;
    last = rank;
  }
}

// ---- kimi_linear, and the refusals ----------------------------------------------------------
model::TinySpec linear_spec() {
  model::TinySpec s = testing::tiny_linear_spec();
  s.expert_groups = 1;
  s.topk_groups = 1;
  s.vocab = 4352;  // the default model's tokenizer is copied in
  return s;
}

void write_with_tokenizer(const model::TinySpec& s, const std::string& dir) {
  model::write_tiny_checkpoint(s, dir);
  for (const char* f : {"tiktoken.model", "tokenizer_config.json"})
    fs::copy_file(kDefaultModel + "/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
}

TEST(ExportGguf, KimiLinearLayout) {
  TempDir tmp("gguf");
  const model::TinySpec s = linear_spec();
  write_with_tokenizer(s, tmp / "m");
  const Gguf g = read_gguf(export_to(tmp / "m", tmp, "lin.gguf"));
  check_layout(g);
  const model::KimiConfig c = model::load_kimi_config(tmp / "m");
  EXPECT_EQ(g.kv.at("general.architecture").s, "kimi-linear");
  EXPECT_EQ(g.kv.count("kimi-linear.attention.q_lora_rank"), 0u);
  EXPECT_EQ(g.kv.count("kimi-linear.activation.situ_beta"), 0u);
  EXPECT_EQ(g.kv.at("tokenizer.ggml.eos_token_id").u, 4097u);  // [EOS], as kimi_linear.py sets it
  const int64_t E = c.hidden_size, H = c.num_heads, Dk = c.kda_head_dim, P = c.kda_dim();
  const format::TensorSet ts = format::TensorSet::open_dir(tmp / "m");
  const int kda = c.attn[0] == model::AttnKind::KDA ? 0 : 2;
  const std::string b = "blk." + std::to_string(kda) + ".";
  expect_tensor(g, b + "ssm_a", {1, H, 1, 1}, 0);
  expect_tensor(g, b + "ssm_g_a.weight", {E, Dk}, 30);
  expect_tensor(g, b + "ssm_g_b.weight", {Dk, P}, 30);
  EXPECT_EQ(g.tensors.count(b + "ssm_g.weight"), 0u);
  expect_tensor(g, "blk.1.attn_q.weight", {E, H * c.qk_head_dim()}, 30);
  EXPECT_EQ(g.tensors.count("blk.1.attn_gate.weight"), 0u);
  // BF16 experts stacked [expert][row][col]: byte-identical to the checkpoint's, expert after expert.
  const std::string gn = "blk.1.ffn_down_exps.weight";
  expect_tensor(g, gn, {c.moe_intermediate_size, E, c.num_experts}, 30);
  const uint8_t* at = g.data(gn);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const format::TensorInfo& t = ts.get("model.layers.1.block_sparse_moe.experts." + std::to_string(e) + ".w2.weight");
    ASSERT_EQ(std::memcmp(at, t.data, t.nbytes), 0) << e;
    at += t.nbytes;
  }
  size_t want = 3;
  for (int64_t l = 0; l < c.num_layers; ++l)
    want += 2 + (c.attn[size_t(l)] == model::AttnKind::KDA ? 15 : 6) + (c.mlp[size_t(l)] == model::MlpKind::Dense ? 3 : 8);
  EXPECT_EQ(g.tensors.size(), want);
}

TEST(ExportGguf, RefusesWhatLlamaCppCannotExpress) {
  TempDir tmp("gguf");
  model::TinySpec grouped = linear_spec();
  grouped.expert_groups = 3;
  grouped.topk_groups = 2;
  write_with_tokenizer(grouped, tmp / "grouped");
  expect_refused(tmp / "grouped", tmp, "grouped expert routing");

  model::TinySpec heads = testing::tiny_k3_spec();
  heads.vocab = 4352;
  heads.kda_heads = 2;
  write_with_tokenizer(heads, tmp / "heads");
  expect_refused(tmp / "heads", tmp, "KDA heads (2) differing from attention heads (4)");

  model::TinySpec notok = linear_spec();
  model::write_tiny_checkpoint(notok, tmp / "notok");
  expect_refused(tmp / "notok", tmp, "no tokenizer");

  expect_refused(tmp / "missing", tmp, "not a model directory");
  expect_refused(std::string(SLUICE_SOURCE_DIR) + "/models/default/draft-qwen3", tmp, "cannot be exported to GGUF");
}

}  // namespace
}  // namespace sluice
