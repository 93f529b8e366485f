// The Kimi -> GGUF mapping (names, ggml shapes, keys) follows llama.cpp's converters for kimi-k3 and
// kimi-linear (conversion/kimi_k3.py, kimi_linear.py) and the loaders of the binary we test
// against (src/models/kimi-k3.cpp, kimi-linear.cpp): ggml shapes are the PyTorch shapes reversed
// (ne[0] = the contiguous, input dimension). The checkpoint is read through sluice's own tensor
// list (every tensor checked for name, dtype and shape) and streamed: matrices go from the mapped
// file to the output unchanged.
#include "export/export_gguf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "export/gguf_vocab.h"
#include "export/gguf_writer.h"
#include "format/json_util.h"
#include "format/kimi_config.h"
#include "format/safetensors.h"
#include "model/arch/kimi.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"

namespace sluice::gguf {
namespace {

namespace fs = std::filesystem;
using format::AttnKind;
using format::KimiArch;
using format::KimiConfig;
using format::MlpKind;
using kernels::Weight;
using kernels::WeightType;

// llama_ftype values (general.file_type, display only).
constexpr uint32_t kFileAllF32 = 0, kFileMostlyBF16 = 32, kFileMostlyMxfp4Moe = 38;
constexpr uint32_t kGatingSigmoid = 2;  // llama_expert_gating_func_type

float element_f32(const void* data, DType dt, size_t i) {
  switch (dt) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: fail("unexpected dtype ", dtype_name(dt));
  }
}

DType weight_dtype(const Weight& w) { return w.type == WeightType::F32 ? DType::F32 : DType::BF16; }

class Exporter {
 public:
  Exporter(const KimiConfig& c, Writer& w, const format::TensorSet& ts, bool widen)
      : c_(c), w_(w), ts_(ts), widen_(widen) {}

  // A [rows, cols] matrix as it is (BF16 or F32): ne {cols, rows}.
  void matrix(const std::string& name, const Weight& m) {
    SLUICE_CHECK(m.type == WeightType::BF16 || m.type == WeightType::F32, name, ": ", kernels::weight_type_name(m.type),
                 " matrices outside the routed experts cannot be exported");
    if (widen_) return matrix_f32(name, m);
    const TensorType t = m.type == WeightType::F32 ? TensorType::F32 : TensorType::BF16;
    const size_t bytes = kernels::weight_data_bytes(m);
    w_.add_tensor(name, {m.cols, m.rows}, t, [&m, bytes](Sink& s) { s.write(m.data, bytes); });
  }
  // A matrix widened to F32 (llama.cpp reads the router as F32).
  void matrix_f32(const std::string& name, const Weight& m) {
    const DType dt = weight_dtype(m);
    w_.add_tensor(name, {m.cols, m.rows}, TensorType::F32, [&m, dt](Sink& s) {
      std::vector<float> row(size_t(m.cols));
      for (int64_t r = 0; r < m.rows; ++r) {
        for (int64_t k = 0; k < m.cols; ++k) row[size_t(k)] = element_f32(m.data, dt, size_t(r * m.cols + k));
        s.write(row.data(), row.size() * 4);
      }
    });
  }
  // F32 values already in memory (widened parameters, derived vectors).
  void f32(const std::string& name, std::vector<int64_t> ne, std::vector<float> values) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    SLUICE_CHECK(int64_t(values.size()) == n, name, ": ", values.size(), " values for ", n, " elements");
    auto v = std::make_shared<std::vector<float>>(std::move(values));
    w_.add_tensor(name, std::move(ne), TensorType::F32, [v](Sink& s) { s.write(v->data(), v->size() * 4); });
  }
  // kv_b_proj [H*(Dn+Dv), R] split per head into k_b (numpy [H, R, Dn]) and v_b ([H, Dv, R]).
  void kv_b(const std::string& blk, const Weight& m) {
    const int64_t H = c_.num_heads, Dn = c_.qk_nope_head_dim, Dv = c_.v_head_dim, R = c_.kv_lora_rank;
    SLUICE_CHECK(m.type == WeightType::BF16 || m.type == WeightType::F32, blk, "kv_b_proj: unsupported type");
    if (widen_) {
      const DType dt = weight_dtype(m);
      std::vector<float> k(size_t(Dn * R * H)), v(size_t(R * Dv * H));
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t r = 0; r < R; ++r)
          for (int64_t d = 0; d < Dn; ++d)
            k[size_t((h * R + r) * Dn + d)] = element_f32(m.data, dt, size_t((h * (Dn + Dv) + d) * R + r));
        for (int64_t d = 0; d < Dv; ++d)
          for (int64_t r = 0; r < R; ++r)
            v[size_t((h * Dv + d) * R + r)] = element_f32(m.data, dt, size_t((h * (Dn + Dv) + Dn + d) * R + r));
      }
      f32(blk + "attn_k_b.weight", {Dn, R, H}, std::move(k));
      f32(blk + "attn_v_b.weight", {R, Dv, H}, std::move(v));
      return;
    }
    const TensorType t = m.type == WeightType::F32 ? TensorType::F32 : TensorType::BF16;
    const size_t es = m.type == WeightType::F32 ? 4 : 2;
    const char* base = static_cast<const char*>(m.data);
    w_.add_tensor(blk + "attn_k_b.weight", {Dn, R, H}, t, [=](Sink& s) {
      std::vector<char> row(size_t(Dn) * es);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t d = 0; d < Dn; ++d)
            std::memcpy(&row[size_t(d) * es], base + (size_t((h * (Dn + Dv) + d) * R + r)) * es, es);
          s.write(row.data(), row.size());
        }
    });
    w_.add_tensor(blk + "attn_v_b.weight", {R, Dv, H}, t, [=](Sink& s) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t v = 0; v < Dv; ++v) s.write(base + size_t((h * (Dn + Dv) + Dn + v) * R) * es, size_t(R) * es);
    });
  }
  // One layer's routed experts of slot w{which} stacked: ne {cols, rows, experts}.
  void experts(const std::string& name, int64_t layer, int which) {
    const int64_t X = c_.num_experts, in = c_.expert_input_size(), inter = c_.moe_intermediate_size;
    const int64_t rows = which == 2 ? in : inter, cols = which == 2 ? inter : in;
    const std::string base = cat(c_.tensor_prefix, "model.layers.", layer, ".block_sparse_moe.experts.");
    std::vector<const format::TensorInfo*> data, scales;
    for (int64_t e = 0; e < X; ++e) {
      const std::string t = cat(base, e, ".w", which, ".");
      if (c_.experts_mxfp4) {
        data.push_back(&checked(t + "weight_packed", DType::U8, {rows, cols / 2}));
        scales.push_back(&checked(t + "weight_scale", DType::U8, {rows, cols / 32}));
      } else {
        const format::TensorInfo* ti = ts_.find(t + "weight");
        SLUICE_CHECK(ti, ts_.dir(), ": missing tensor ", t, "weight");
        SLUICE_CHECK(ti->dtype == DType::BF16 || ti->dtype == DType::F32, ts_.dir(), ": tensor ", t,
                     "weight is ", dtype_name(ti->dtype), " (BF16 or F32 expected)");
        data.push_back(&checked(t + "weight", ti->dtype, {rows, cols}));
      }
    }
    if (c_.experts_mxfp4 && widen_) {
      w_.add_tensor(name, {cols, rows, X}, TensorType::F32, [=](Sink& s) {
        std::vector<float> out(static_cast<size_t>(cols));
        for (int64_t e = 0; e < X; ++e) {
          const auto* p = reinterpret_cast<const uint8_t*>(data[size_t(e)]->data);
          const auto* sc = reinterpret_cast<const uint8_t*>(scales[size_t(e)]->data);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t k = 0; k < cols; ++k) {
              const uint8_t byte = p[r * (cols / 2) + k / 2];
              out[size_t(k)] = kE2M1Values[k % 2 ? byte >> 4 : byte & 15] * e8m0_to_f32(sc[r * (cols / 32) + k / 32]);
            }
            s.write(out.data(), out.size() * 4);
          }
        }
      });
    } else if (c_.experts_mxfp4) {
      w_.add_tensor(name, {cols, rows, X}, TensorType::MXFP4, [=](Sink& s) {
        std::vector<uint8_t> out(size_t(cols / 32) * 17);
        for (int64_t e = 0; e < X; ++e) {
          const auto* p = reinterpret_cast<const uint8_t*>(data[size_t(e)]->data);
          const auto* sc = reinterpret_cast<const uint8_t*>(scales[size_t(e)]->data);
          for (int64_t r = 0; r < rows; ++r) {
            repack_mxfp4_row(p + r * (cols / 2), sc + r * (cols / 32), cols, out.data());
            s.write(out.data(), out.size());
          }
        }
      });
    } else {
      const DType dt = data[0]->dtype;
      for (const auto* ti : data)
        SLUICE_CHECK(ti->dtype == dt, ts_.dir(), ": routed experts of layer ", layer, " mix dtypes");
      if (widen_ && dt != DType::F32) {
        w_.add_tensor(name, {cols, rows, X}, TensorType::F32, [=](Sink& s) {
          std::vector<float> out(static_cast<size_t>(cols));
          for (const auto* ti : data)
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t k = 0; k < cols; ++k) out[size_t(k)] = element_f32(ti->data, dt, size_t(r * cols + k));
              s.write(out.data(), out.size() * 4);
            }
        });
        return;
      }
      w_.add_tensor(name, {cols, rows, X}, dt == DType::F32 ? TensorType::F32 : TensorType::BF16, [=](Sink& s) {
        for (const auto* ti : data) s.write(ti->data, ti->nbytes);
      });
    }
  }

 private:
  const format::TensorInfo& checked(const std::string& name, DType dt, std::vector<int64_t> shape) {
    const format::TensorInfo& t = ts_.get(name);
    SLUICE_CHECK(t.dtype == dt && t.shape == shape, ts_.dir(), ": tensor ", name, " is ", dtype_name(t.dtype), " ",
                 model::shape_str(t.shape), ", config implies ", dtype_name(dt), " ", model::shape_str(shape));
    return t;
  }
  const KimiConfig& c_;
  Writer& w_;
  const format::TensorSet& ts_;
  bool widen_ = false;
};

// What llama.cpp's graph for the architecture cannot express: refused by name.
void check_expressible(const KimiConfig& c, const std::string& arch) {
  auto refuse = [&](const std::string& what) {
    fail("cannot export to GGUF: llama.cpp's ", arch, " cannot express ", what);
  };
  if (c.kda_heads != c.num_heads)
    refuse(cat("KDA heads (", c.kda_heads, ") differing from attention heads (", c.num_heads,
               "): it reads both from attention.head_count"));
  if (c.num_expert_group > 1 || c.topk_group > 1)
    refuse(cat("grouped expert routing (num_expert_group ", c.num_expert_group, ", topk_group ", c.topk_group, ")"));
  if (c.num_experts > 1024) refuse(cat(c.num_experts, " experts per layer (at most 1024)"));
  if (c.num_layers > 512) refuse(cat(c.num_layers, " layers (at most 512)"));
  if (c.arch == KimiArch::KimiK3) {
    if (c.activation != format::Activation::SiTU) refuse("a SiLU MLP (its K3 graph always uses SiTU)");
    if (!c.kda_full_rank_gate) refuse("a low-rank KDA output gate (g_a_proj/g_b_proj; its K3 graph reads ssm_g only)");
  } else {
    if (c.q_lora_rank > 0) refuse(cat("q_lora_rank ", c.q_lora_rank, " (its kimi-linear graph uses a plain q_proj)"));
    if (c.mla_output_gate) refuse("the MLA output gate (mla_use_output_gate)");
    if (c.kda_full_rank_gate) refuse("a full-rank KDA output gate (use_full_rank_gate)");
    if (c.gate_lower_bound) refuse("the KDA gate_lower_bound");
    if (c.activation != format::Activation::SiLU) refuse("the SiTU activation");
    if (c.attn_res_block_size > 0) refuse("Block AttnRes (attn_res_block_size)");
    if (c.routed_expert_hidden_size > 0) refuse("latent MoE (routed_expert_hidden_size)");
    if (!c.renormalize) refuse("moe_renormalize false (its graph always renormalises)");
  }
  if (c.experts_mxfp4 && (c.expert_input_size() % 32 != 0 || c.moe_intermediate_size % 32 != 0))
    refuse("MXFP4 experts whose widths are not multiples of 32");
}

std::string basename_of(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

void repack_mxfp4_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint8_t* out) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* p = packed + b * 16;  // byte k: element 2k (low nibble), 2k+1 (high nibble)
    auto code = [p](int i) { return uint8_t((p[i / 2] >> (4 * (i & 1))) & 0x0F); };
    uint8_t* o = out + b * 17;
    o[0] = scales[b];
    for (int j = 0; j < 16; ++j) o[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
  }
}

ExportSummary export_gguf(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  SLUICE_CHECK(fs::is_directory(model_dir), model_dir, ": not a model directory");
  const std::string config_path = (fs::path(model_dir) / "config.json").string();
  SLUICE_CHECK(fs::exists(config_path), model_dir, ": no config.json");
  const nlohmann::json root = format::read_json_file(config_path);
  const std::string model_type = root.is_object() && root.contains("model_type") && root["model_type"].is_string()
                                     ? root["model_type"].get<std::string>()
                                     : std::string("(none)");
  if (model_type != "kimi_k3" && model_type != "kimi_linear")
    fail(config_path, ": model_type '", model_type, "' cannot be exported to GGUF (supported: kimi_k3, kimi_linear)");
  const KimiConfig c = format::load_kimi_config(model_dir);
  const bool k3 = c.arch == KimiArch::KimiK3;
  const std::string arch = k3 ? "kimi-k3" : "kimi-linear";
  check_expressible(c, arch);
  const nlohmann::json& tc = k3 && root.contains("text_config") ? root["text_config"] : root;

  auto tok = tokenizer::load_tokenizer(model_dir);
  SLUICE_CHECK(tok, model_dir, ": no tokenizer (tiktoken.model and tokenizer_config.json); GGUF needs the vocabulary");
  SLUICE_CHECK(tok->describe().rfind("tiktoken", 0) == 0, model_dir, ": tokenizer ", tok->describe(),
               " cannot be exported: llama.cpp's ", arch, " uses Kimi's tiktoken vocabulary (pre-tokenizer kimi-k2)");
  const GgufVocab vocab = build_vocab(*tok, c.vocab_size);

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::KimiWeights>();
  model::kimi_tensors(c, weights.get()).bind(ts);
  const model::KimiWeights& W = *weights;

  if (!k3 && c.mla_norm_eps != c.rms_norm_eps && opt.note)
    opt.note(cat("note: kimi-linear's kv_a_layernorm eps is ", c.mla_norm_eps, " here; llama.cpp uses rms_norm_eps (",
                 c.rms_norm_eps, ") for it, as its own converter leaves it"));

  Writer w;
  const std::string a = arch + ".";
  w.add_string("general.architecture", arch);
  w.add_string("general.name", basename_of(model_dir));
  w.add_u32("general.file_type", opt.widen_to_f32 ? kFileAllF32 : c.experts_mxfp4 ? kFileMostlyMxfp4Moe
                                  : W.embed.type == WeightType::BF16 ? kFileMostlyBF16
                                                                     : kFileAllF32);
  w.add_u32("general.quantization_version", 2);
  w.add_u32(a + "vocab_size", uint32_t(c.vocab_size));
  w.add_u32(a + "block_count", uint32_t(c.num_layers));
  const double ctx = tc.contains("max_position_embeddings") && tc["max_position_embeddings"].is_number()
                         ? tc["max_position_embeddings"].get<double>()
                         : 131072.0;
  w.add_u32(a + "context_length", uint32_t(std::min(ctx, 4294967295.0)));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_heads));
  std::vector<int32_t> kv_heads;
  for (AttnKind k : c.attn) kv_heads.push_back(k == AttnKind::MLA ? 1 : 0);
  w.add_i32_array(a + "attention.head_count_kv", kv_heads);
  if (tc.contains("rope_theta") && tc["rope_theta"].is_number())
    w.add_f32(a + "rope.freq_base", float(tc["rope_theta"].get<double>()));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_u32(a + "expert_count", uint32_t(c.num_experts));
  w.add_u32(a + "expert_used_count", uint32_t(c.experts_per_token));
  w.add_u32(a + "expert_gating_func", kGatingSigmoid);
  w.add_u32(a + "ssm.conv_kernel", uint32_t(c.conv_kernel));
  w.add_u32(a + "kda.head_dim", uint32_t(c.kda_head_dim));
  if (k3 && c.gate_lower_bound) w.add_f32(a + "kda.gate_lower_bound", *c.gate_lower_bound);
  if (k3 && c.q_lora_rank > 0) w.add_u32(a + "attention.q_lora_rank", uint32_t(c.q_lora_rank));
  w.add_u32(a + "attention.kv_lora_rank", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "rope.dimension_count", uint32_t(c.qk_rope_head_dim));
  w.add_u32(a + "attention.key_length", uint32_t(c.kv_lora_rank + c.qk_rope_head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "attention.key_length_mla", uint32_t(c.qk_head_dim()));
  w.add_u32(a + "attention.value_length_mla", uint32_t(c.v_head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  w.add_u32(a + "expert_shared_count", uint32_t(c.num_shared_experts));
  int64_t dense = 0;
  while (dense < c.num_layers && c.mlp[size_t(dense)] == MlpKind::Dense) ++dense;
  for (int64_t l = dense; l < c.num_layers; ++l)
    SLUICE_CHECK(c.mlp[size_t(l)] == MlpKind::MoE, "cannot export to GGUF: llama.cpp's ", arch,
                 " cannot express a dense MLP after the first MoE layer (layer ", l, ")");
  w.add_u32(a + "leading_dense_block_count", uint32_t(dense));
  w.add_f32(a + "expert_weights_scale", c.routed_scaling_factor);
  if (k3) {
    w.add_bool(a + "expert_weights_norm", c.renormalize);
    if (c.routed_expert_hidden_size > 0) w.add_u32(a + "expert_latent_length", uint32_t(c.routed_expert_hidden_size));
    w.add_f32(a + "activation.situ_beta", c.situ_beta_gate);
    w.add_f32(a + "activation.situ_linear_beta", c.situ_beta_up);
    w.add_u32(a + "attn_res.block_size", uint32_t(c.attn_res_block_size));
  }

  // Tokenizer (llama.cpp "gpt2" BPE with Kimi's pre-tokenizer).
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "kimi-k2");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  // Special ids as gguf's SpecialVocab finds them (tokenizer_config.json's spellings), eos then as
  // the converters set it: K3 the config's eos_token_id, kimi-linear the tokenizer's [EOS].
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
  std::optional<int32_t> bos = special_of("bos_token"), eos = special_of("eos_token");
  if (!bos && c.bos_token_id >= 0) bos = c.bos_token_id;
  if (k3 && c.eos_token_id >= 0) eos = c.eos_token_id;
  if (!k3) {
    if (auto e = tok->special_id("[EOS]")) eos = e;
  }
  if (!eos && c.eos_token_id >= 0) eos = c.eos_token_id;
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
    w.add_string("tokenizer.chat_template", tokenizer::read_whole_file((fs::path(model_dir) / "chat_template.jinja").string()));
  }

  // Tensors.
  Exporter x(c, w, ts, opt.widen_to_f32);
  const int64_t H = c.hidden_size, P = c.kda_dim();
  const bool attn_res = c.attn_res_block_size > 0;
  auto res_score = [](const model::Param& norm, const model::Param& proj) {
    std::vector<float> s(norm.host.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = norm.host[i] * proj.host[i];
    return s;
  };
  x.matrix("token_embd.weight", W.embed);
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  if (attn_res) x.f32("output_res_score.weight", {H}, res_score(W.out_res_norm, W.out_res_proj));
  x.matrix("output.weight", W.lm_head);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const model::KimiLayerWeights& lw = W.layers[size_t(l)];
    const std::string b = cat("blk.", l, ".");
    x.f32(b + "attn_norm.weight", {H}, lw.input_norm.host);
    x.f32(b + "ffn_norm.weight", {H}, lw.post_norm.host);
    if (attn_res) {
      x.f32(b + "attn_res_score.weight", {H}, res_score(lw.attn_res_norm, lw.attn_res_proj));
      x.f32(b + "ffn_res_score.weight", {H}, res_score(lw.mlp_res_norm, lw.mlp_res_proj));
    }
    if (lw.attn_kind == AttnKind::KDA) {
      const model::KdaWeights& k = lw.kda;
      x.f32(b + "ssm_conv1d_q.weight", {c.conv_kernel, 1, P, 1}, k.q_conv.host);
      x.f32(b + "ssm_conv1d_k.weight", {c.conv_kernel, 1, P, 1}, k.k_conv.host);
      x.f32(b + "ssm_conv1d_v.weight", {c.conv_kernel, 1, P, 1}, k.v_conv.host);
      x.matrix(b + "attn_q.weight", k.q);
      x.matrix(b + "attn_k.weight", k.k);
      x.matrix(b + "attn_v.weight", k.v);
      x.matrix(b + "ssm_f_a.weight", k.f_a);
      x.matrix(b + "ssm_f_b.weight", k.f_b);
      x.matrix(b + "ssm_beta.weight", k.b);
      // ssm_a holds -exp(A_log), one per head (K3 pads A_log with zeros to the head width).
      std::vector<float> ssm_a(size_t(c.kda_heads));
      for (size_t i = 0; i < k.a_log.host.size(); ++i) {
        if (i < ssm_a.size()) {
          ssm_a[i] = -std::exp(k.a_log.host[i]);
        } else {
          SLUICE_CHECK(k.a_log.host[i] == 0.0f, ts.dir(), ": layer ", l, " A_log entry ", i, " is ", k.a_log.host[i],
                       "; A_log holds one value per head (", c.kda_heads, ")");
        }
      }
      if (k3) x.f32(b + "ssm_a", {c.kda_heads}, std::move(ssm_a));
      else x.f32(b + "ssm_a", {1, c.kda_heads, 1, 1}, std::move(ssm_a));
      x.f32(b + "ssm_dt.bias", {P}, k.dt_bias.host);
      if (k3) {
        x.matrix(b + "ssm_g.weight", k.g);
      } else {
        x.matrix(b + "ssm_g_a.weight", k.g_a);
        x.matrix(b + "ssm_g_b.weight", k.g_b);
      }
      x.f32(b + "ssm_norm.weight", {c.kda_head_dim}, k.o_norm.host);
      x.matrix(b + "attn_output.weight", k.o);
    } else {
      const model::MlaWeights& m = lw.mla;
      if (c.q_lora_rank > 0) {
        x.matrix(b + "attn_q_a.weight", m.q_a);
        x.f32(b + "attn_q_a_norm.weight", {c.q_lora_rank}, m.q_a_norm.host);
        x.matrix(b + "attn_q_b.weight", m.q_b);
      } else {
        x.matrix(b + "attn_q.weight", m.q);
      }
      x.matrix(b + "attn_kv_a_mqa.weight", m.kv_a);
      x.f32(b + "attn_kv_a_norm.weight", {c.kv_lora_rank}, m.kv_a_norm.host);
      x.kv_b(b, m.kv_b);
      if (c.mla_output_gate) x.matrix(b + "attn_gate.weight", m.g);
      x.matrix(b + "attn_output.weight", m.o);
    }
    if (lw.mlp_kind == MlpKind::Dense) {
      x.matrix(b + "ffn_gate.weight", lw.dense.gate);
      x.matrix(b + "ffn_up.weight", lw.dense.up);
      x.matrix(b + "ffn_down.weight", lw.dense.down);
    } else {
      const model::MoeWeights& m = lw.moe;
      x.matrix_f32(b + "ffn_gate_inp.weight", m.router);
      x.f32(b + "exp_probs_b.bias", {c.num_experts}, m.correction_bias.host);
      x.experts(b + "ffn_gate_exps.weight", l, 1);
      x.experts(b + "ffn_down_exps.weight", l, 2);
      x.experts(b + "ffn_up_exps.weight", l, 3);
      if (c.routed_expert_hidden_size > 0) {
        x.matrix(b + "ffn_routed_down.weight", m.latent_down);
        x.matrix(b + "ffn_routed_up.weight", m.latent_up);
        if (c.latent_moe_norm) x.f32(b + "ffn_routed_norm.weight", {c.routed_expert_hidden_size}, m.latent_norm.host);
      }
      if (m.has_shared) {
        x.matrix(b + "ffn_gate_shexp.weight", m.shared.gate);
        x.matrix(b + "ffn_up_shexp.weight", m.shared.up);
        x.matrix(b + "ffn_down_shexp.weight", m.shared.down);
      }
    }
  }
  ExportSummary sum{arch, w.tensor_count(), w.key_count(), w.data_bytes()};
  w.write(out, opt.progress);
  return sum;
}

}  // namespace sluice::gguf
