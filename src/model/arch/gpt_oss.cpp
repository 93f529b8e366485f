// The gpt-oss target: tensor list, expert bank, loading, and its attention and MoE blocks inside the
// shared pre-norm decoder pass (model/cache_model.h).
#include "model/arch/gpt_oss.h"

#include <algorithm>

#include "core/error.h"
#include "model/device_plan.h"

namespace sluice::model {

using device::Buf;

TensorList gpt_oss_tensors(const GptOssConfig& c, GptOssWeights* w) {
  GptOssWeights scratch;
  GptOssWeights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  const int64_t H = c.hidden_size;
  TensorList t;
  t.matrix("model.embed_tokens.weight", c.vocab_size, H, bind(&W.embed));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    GptOssLayerWeights& lw = W.layers[size_t(l)];
    const std::string L = cat("model.layers.", l, "."), A = L + "self_attn.";
    t.param(L + "input_layernorm.weight", {H}, bind(&lw.input_norm), Init::NormWeight);
    const struct {
      const char* name;
      device::Weight* w;
      int64_t rows, cols;
    } proj[] = {{"q_proj", &lw.attn.q, c.q_dim(), H},
                {"k_proj", &lw.attn.k, c.kv_dim(), H},
                {"v_proj", &lw.attn.v, c.kv_dim(), H},
                {"o_proj", &lw.attn.o, H, c.q_dim()}};
    for (const auto& p : proj) {
      t.matrix(cat(A, p.name, ".weight"), p.rows, p.cols, bind(p.w));
      if (c.attention_bias) t.bias(cat(A, p.name, ".bias"), p.rows, bind(p.w));
    }
    t.param(A + "sinks", {c.num_heads}, bind(&lw.attn.sinks), Init::Sink);
    t.param(L + "post_attention_layernorm.weight", {H}, bind(&lw.post_norm), Init::NormWeight);
    t.matrix(L + "mlp.router.weight", c.num_experts, H, bind(&lw.moe.router));
    t.bias(L + "mlp.router.bias", c.num_experts, bind(&lw.moe.router));
    t.experts(int(l));
  }
  t.param("model.norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  if (!c.tie_word_embeddings) t.matrix("lm_head.weight", c.vocab_size, H, bind(&W.lm_head));
  return t;
}

store::ExpertBank gpt_oss_expert_bank(const GptOssConfig& c) {
  using store::ExpertSegment;
  using store::ExpertSlot;
  using store::SegmentRole;
  store::ExpertBank b;
  b.num_layers = c.num_layers;
  b.num_experts = c.num_experts;
  for (int l = 0; l < int(c.num_layers); ++l) b.moe_layers.push_back(l);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  // gate_up_proj: [2I, H] with gate unit i at row 2i and up unit i at row 2i + 1; down_proj [H, I].
  // Each is E2M1 codes [rows, cols/32, 16] (low nibble = even column), E8M0 scales [rows, cols/32]
  // and a BF16 bias, one tensor per part holding every expert of the layer.
  b.layout.gate_up_interleaved = true;
  const struct {
    ExpertSlot slot;
    const char* name;
    int64_t rows, cols;
  } mats[] = {{ExpertSlot::Gate, "gate_up_proj", 2 * I, H}, {ExpertSlot::Down, "down_proj", H, I}};
  for (const auto& m : mats) {
    b.layout.matrices.push_back({m.slot, device::WeightType::MXFP4, m.rows, m.cols});
    const std::string base = cat("model.layers.{L}.mlp.experts.", m.name);
    auto seg = [&](const char* part, SegmentRole role, DType dt, std::vector<int64_t> shape) {
      uint64_t bytes = uint64_t(dtype_size(dt));
      for (int64_t d : shape) bytes *= uint64_t(d);
      b.layout.add(ExpertSegment{.slot = m.slot, .role = role, .key = cat(m.name, part), .dtype = dt,
                                 .shape = std::move(shape), .bytes = bytes, .tensor = base + part});
    };
    seg("_blocks", SegmentRole::Data, DType::U8, {m.rows, m.cols / 32, 16});
    seg("_scales", SegmentRole::Scales, DType::U8, {m.rows, m.cols / 32});
    seg("_bias", SegmentRole::Bias, DType::BF16, {m.rows});
  }
  return b;
}

std::unique_ptr<GptOssModel> GptOssModel::load(const LoadOptions& opt) {
  std::unique_ptr<GptOssModel> m(new GptOssModel());
  m->dev_ = opt.device ? opt.device : &device::cpu_device();
  m->config_ = load_gpt_oss_config(opt.dir);
  const GptOssConfig& c = m->config_;
  m->tensors_ = format::TensorSet::open_dir(opt.dir);
  TensorList list = gpt_oss_tensors(c, &m->weights_);
  list.bind(m->tensors_);
  m->bank_ = gpt_oss_expert_bank(c);
  check_device_plan(*m->dev_, opt.dir,
                    {.spine_bytes = list.bytes(), .expert_bytes = opt.resident_experts ? m->bank_.total_record_bytes() : 0});
  list.keep(*m->dev_);
  if (c.tie_word_embeddings) m->weights_.lm_head = m->weights_.embed;
  m->open_experts(m->tensors_, opt.resident_experts);
  m->full_ = GqaSpec{.heads = c.num_heads, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
                     .norm_eps = c.rms_norm_eps, .pairs = device::RopePairs::Half};
  m->sliding_ = m->full_;
  m->sliding_.window = c.sliding_window;
  m->set_mlps(m->weights_.layers, [](size_t) { return true; }, static_cast<const MlpWeights GptOssLayerWeights::*>(nullptr),
              MoeSpec{.router = {.score = device::RouterScore::TopkSoftmax, .experts = c.num_experts,
                                 .top_k = c.experts_per_token, .renormalize = false},
                      .act = {.kind = device::ActKind::ClampedSwiGLU, .alpha = c.swiglu_alpha, .limit = c.swiglu_limit},
                      .expert_input = c.hidden_size},
              c.rms_norm_eps);

  m->set_decoder(m->weights_.embed, m->weights_.lm_head, m->weights_.final_norm, m->weights_.layers, c.rms_norm_eps,
                 c.vocab_size, c.hidden_size, c.rope, c.head_dim);
  m->cache_widths_.assign(size_t(c.num_layers), CacheWidths{c.kv_dim(), c.kv_dim()});
  m->info_ = TargetInfo{.model_type = "gpt_oss", .family = "gpt_oss", .vocab_size = c.vocab_size,
                        .hidden_size = c.hidden_size, .num_layers = c.num_layers, .bos_token_id = c.bos_token_id,
                        .eos_token_ids = c.eos_token_ids};
  m->capture_slot_.reserve(size_t(c.num_layers));
  return m;
}

void GptOssModel::attention(CacheState& st, size_t l, int64_t base, const Buf& rope, const PassOptions& opt,
                            const Buf& x, Buf out) {
  const GqaSpec& spec = config_.sliding[l] ? sliding_ : full_;
  gqa_forward(*dev_, spec, weights_.layers[l].attn, rope, st.first(l), st.second(l), base, x, out, opt.cancel);
}

int64_t GptOssModel::pass_bytes_per_row(bool) const {
  const GptOssConfig& c = config_;
  // h, normed, out, the RoPE row, q/k/v/attention, router logits, the k expert outputs, and one
  // expert's interleaved and split intermediates.
  return int64_t(sizeof(float)) * (3 * c.hidden_size + c.head_dim + 2 * c.q_dim() + 2 * c.kv_dim() + c.num_experts +
                                   (c.experts_per_token + 1) * c.hidden_size + 4 * c.intermediate_size);
}

namespace {

std::unique_ptr<Target> load_gpt_oss(const LoadOptions& opt) { return GptOssModel::load(opt); }

}  // namespace

const Architecture kGptOssArchitecture{"gpt_oss", {"gpt_oss"}, load_gpt_oss,
                                    bank_from_text<parse_gpt_oss_config, gpt_oss_expert_bank>,
                                    roster_from_text<parse_gpt_oss_config, gpt_oss_tensors, gpt_oss_expert_bank>,
                                    gpt_oss_tiny};

}  // namespace sluice::model
