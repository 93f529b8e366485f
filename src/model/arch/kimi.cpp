// The Kimi-family target: loading against the tensor list, the per-sequence state on the device
// (KDA conv windows and recurrent matrices, the compact MLA cache, the verify pass's record), the
// forward pass, commit_prefix, snapshots and a state as bytes.
#include "model/arch/kimi.h"
#include "model/device_plan.h"

#include <algorithm>

#include "core/error.h"
#include "store/resident_experts.h"

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::DeviceBuffer;

// A sequence's state. KDA layers keep two copies of their state: an ordinary pass updates the
// current one in place; a recorded (verify) pass writes its result into the other and leaves the
// current one as it was, so commit_prefix either keeps the new copy (everything accepted) or
// replays the accepted rows onto the old one. Nothing is copied or allocated per pass; the second
// copy and the record are allocated on the first recorded pass, the MLA cache doubles as needed.
class KimiState final : public State {
 public:
  KimiState(const KimiConfig& c, device::Device& d) : c_(c), dev_(d) {
    const int64_t P = c.kda_dim();
    for (auto kind : c.attn) {
      if (kind == AttnKind::KDA) {
        Kda k;
        k.conv[0] = DeviceBuffer(d, BufType::F32, 3, P * (c.conv_kernel - 1));
        k.S[0] = DeviceBuffer(d, BufType::F32, c.kda_heads, c.kda_head_dim * c.kda_head_dim);
        kda.push_back(std::move(k));
      } else {
        mla.emplace_back();
      }
    }
    reserve(256);
  }

  int64_t length() const override { return length_; }
  void reset() override {
    for (Kda& k : kda) {
      dev_.fill(k.state(k.cur).conv, 0.0f);
      dev_.fill(k.state(k.cur).S, 0.0f);
    }
    length_ = 0;
    record.valid = false;
  }

  // Room for `positions` MLA rows (grows geometrically, keeping the rows held so far).
  void reserve(int64_t positions) {
    if (positions <= capacity_) return;
    const int64_t cap = std::max<int64_t>(positions, capacity_ * 2);
    for (Mla& m : mla) {
      DeviceBuffer latent(dev_, BufType::F32, cap, c_.kv_lora_rank), k_pe(dev_, BufType::F32, cap, c_.qk_rope_head_dim);
      if (length_ > 0) {
        dev_.copy(latent.buf().rows_view(0, length_), m.latent.buf().rows_view(0, length_));
        dev_.copy(k_pe.buf().rows_view(0, length_), m.k_pe.buf().rows_view(0, length_));
      }
      m.latent = std::move(latent);
      m.k_pe = std::move(k_pe);
    }
    capacity_ = cap;
  }

  // Room for a recorded pass of `rows` rows: the second KDA copy and the record buffers.
  void reserve_record(int64_t rows) {
    const int64_t P = c_.kda_dim();
    for (Kda& k : kda) {
      if (k.conv[1].empty()) {
        k.conv[1] = DeviceBuffer(dev_, BufType::F32, 3, P * (c_.conv_kernel - 1));
        k.S[1] = DeviceBuffer(dev_, BufType::F32, c_.kda_heads, c_.kda_head_dim * c_.kda_head_dim);
      }
      if (k.rec_rows < rows) {
        const int64_t n = std::max(rows, 2 * k.rec_rows);
        k.raw = DeviceBuffer(dev_, BufType::F32, n, 3 * P);
        k.k = DeviceBuffer(dev_, BufType::F32, n, P);
        k.v = DeviceBuffer(dev_, BufType::F32, n, P);
        k.g = DeviceBuffer(dev_, BufType::F32, n, P);
        k.beta = DeviceBuffer(dev_, BufType::F32, n, c_.kda_heads);
        k.rec_rows = n;
      }
    }
  }

  struct Kda {
    DeviceBuffer conv[2], S[2];
    int cur = 0;
    DeviceBuffer raw, k, v, g, beta;  // the record of the last recorded pass
    int64_t rec_rows = 0;
    device::KdaState state(int i) const { return {conv[i].buf(), S[i].buf()}; }
    device::KdaRecord rec() const { return {raw.buf(), k.buf(), v.buf(), g.buf(), beta.buf()}; }
  };
  struct Mla {
    DeviceBuffer latent, k_pe;  // [capacity, kv_lora_rank], [capacity, qk_rope_head_dim]
  };
  struct Record {
    bool valid = false;
    int64_t rows = 0, length_before = 0;
  };

  const KimiConfig& c_;
  device::Device& dev_;
  std::vector<Kda> kda;  // by the ordinal of the layer among layers of its kind
  std::vector<Mla> mla;
  Record record;
  int64_t length_ = 0, capacity_ = 0;
};

class KimiSnapshot final : public Snapshot {
 public:
  int64_t length() const override { return length_; }
  int64_t length_ = 0;
  std::vector<DeviceBuffer> conv, S;
};

namespace {

KimiState& kimi_state(State& s) {
  auto* k = dynamic_cast<KimiState*>(&s);
  SLUICE_CHECK(k, "a state of another architecture was passed to a Kimi model");
  return *k;
}
const KimiState& kimi_state(const State& s) { return kimi_state(const_cast<State&>(s)); }

}  // namespace

std::unique_ptr<KimiModel> KimiModel::load(const std::string& dir, bool resident_experts) {
  return load(LoadOptions{.dir = dir, .resident_experts = resident_experts});
}

std::unique_ptr<KimiModel> KimiModel::load(const LoadOptions& opt) {
  std::unique_ptr<KimiModel> m(new KimiModel());
  const std::string& dir = opt.dir;
  m->dev_ = opt.device ? opt.device : &device::cpu_device();
  m->config_ = load_kimi_config(dir);
  const KimiConfig& c = m->config_;
  m->tensors_ = format::TensorSet::open_dir(dir);
  TensorList list = kimi_tensors(c, &m->weights_);
  list.bind(m->tensors_);
  for (KimiLayerWeights& lw : m->weights_.layers) {
    if (lw.attn_kind != AttnKind::KDA) continue;
    std::vector<float>& a_log = lw.kda.a_log.host;
    for (size_t i = size_t(c.kda_heads); i < a_log.size(); ++i)
      if (a_log[i] != 0.0f)
        fail(m->tensors_.dir(), ": tensor ", "A_log entry ", i, " is ", a_log[i], "; A_log holds one value per head (",
             c.kda_heads, ") and its padding must be zero");
    a_log.resize(size_t(c.kda_heads));
  }
  m->bank_ = kimi_expert_bank(c);
  const bool resident = opt.resident_experts && c.num_experts > 0;
  check_device_plan(*m->dev_, dir, {.spine_bytes = list.bytes(), .expert_bytes = resident ? m->bank_.total_record_bytes() : 0});
  list.keep(*m->dev_);

  const device::Activation act =
      c.activation == Activation::SiTU
          ? device::Activation{.kind = device::ActKind::SiTU, .beta_gate = c.situ_beta_gate, .beta_up = c.situ_beta_up}
          : device::Activation{.kind = device::ActKind::SiLU};
  for (KimiLayerWeights& lw : m->weights_.layers) {
    if (lw.attn_kind != AttnKind::KDA) continue;
    KdaWeights& k = lw.kda;
    k.full_rank_gate = c.kda_full_rank_gate;
    k.op.heads = c.kda_heads;
    k.op.head_dim = c.kda_head_dim;
    k.op.conv_kernel = c.conv_kernel;
    k.op.norm_eps = c.rms_norm_eps;
    k.op.lower_bound_gate = c.gate_lower_bound.has_value();
    k.op.lower_bound = c.gate_lower_bound.value_or(0.0f);
    k.bind_op();
  }
  m->mla_spec_ = MlaSpec{.heads = c.num_heads, .q_lora_rank = c.q_lora_rank, .kv_rank = c.kv_lora_rank,
                         .nope = c.qk_nope_head_dim, .rope = c.qk_rope_head_dim, .v_dim = c.v_head_dim,
                         .norm_eps = c.mla_norm_eps, .output_gate = c.mla_output_gate};
  m->mlps_.bind(m->weights_.layers, [&c](size_t l) { return c.mlp[l] == MlpKind::MoE; }, &KimiLayerWeights::dense,
                MoeSpec{.router = {.score = device::RouterScore::Sigmoid, .experts = c.num_experts,
                                   .top_k = c.experts_per_token, .groups = c.num_expert_group,
                                   .topk_groups = c.topk_group, .renormalize = c.renormalize,
                                   .renorm_eps = 1e-20f, .scaling = c.routed_scaling_factor},
                        .act = act, .expert_input = c.expert_input_size(),
                        .latent = c.routed_expert_hidden_size > 0, .norm_eps = c.rms_norm_eps},
                act, c.rms_norm_eps);

  if (resident) {
    m->resident_ = std::make_unique<store::ResidentExperts>(m->bank_, m->tensors_, m->dev_);
    m->experts_ = m->resident_.get();
  }
  m->info_ = TargetInfo{.model_type = c.arch == KimiArch::KimiK3 ? "kimi_k3" : "kimi_linear",
                        .family = "kimi",
                        .vocab_size = c.vocab_size,
                        .hidden_size = c.hidden_size,
                        .num_layers = c.num_layers,
                        .bos_token_id = c.bos_token_id};
  if (c.eos_token_id >= 0) m->info_.eos_token_ids = {c.eos_token_id};
  const size_t anchors = c.attn_res_block_size > 0 ? size_t(c.num_layers / c.attn_res_block_size + 2) : 0;
  m->anchors_.reserve(anchors);
  m->sources_.reserve(anchors + 1);
  m->capture_slot_.reserve(size_t(c.num_layers));
  return m;
}

KimiModel::~KimiModel() = default;

void KimiModel::set_expert_provider(store::ExpertProvider* p) { experts_ = p ? p : resident_.get(); }

std::unique_ptr<State> KimiModel::new_state() const { return std::make_unique<KimiState>(config_, *dev_); }

void KimiModel::attention(KimiState& st, const KimiLayerWeights& lw, int64_t kda_i, int64_t mla_i, int64_t base,
                          const PassOptions& opt, const Buf& x, Buf out) {
  const bool record = opt.record;
  if (lw.attn_kind == AttnKind::KDA) {
    KimiState::Kda& k = st.kda[size_t(kda_i)];
    const device::KdaState from = k.state(k.cur);
    device::KdaState to = k.state(record ? 1 - k.cur : k.cur);
    const device::KdaRecord rec = record ? k.rec() : device::KdaRecord{};
    kda_forward(*dev_, lw.kda, x, from, to, record ? &rec : nullptr, out, opt.cancel);
  } else {
    KimiState::Mla& m = st.mla[size_t(mla_i)];
    mla_forward(*dev_, mla_spec_, lw.mla, m.latent.buf(), m.k_pe.buf(), base, x, out, opt.cancel);
  }
}

void KimiModel::forward(State& state, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) {
  KimiState& st = kimi_state(state);
  const KimiConfig& c = config_;
  device::Device& d = *dev_;
  const int64_t T = int64_t(tokens.size()), H = c.hidden_size;
  if (T == 0) fail("forward pass with no tokens");
  if (!experts_ && c.num_experts > 0) fail("no expert source: load with resident experts or set a provider");
  check_token_ids(tokens, c.vocab_size);
  const int64_t captured = capture_slots(opt.capture, c.num_layers, capture_slot_);
  const int64_t base = st.length_;
  st.reserve(base + T);
  if (opt.record) st.reserve_record(T);
  st.record.valid = false;

  device::ScratchScope pass(d);
  Buf h = d.scratch(BufType::F32, T, H);
  d.embed(weights_.embed, tokens, h);
  Buf normed = d.scratch(BufType::F32, T, H);
  Buf attn_out = d.scratch(BufType::F32, T, H);
  Buf mlp_out = d.scratch(BufType::F32, T, H);
  Buf prefix = d.scratch(BufType::F32, T, H);
  Buf mix = d.scratch(BufType::F32, T, H);
  Buf cap = captured > 0 ? d.scratch(BufType::F32, T, captured * H) : Buf{};
  const int64_t B = c.attn_res_block_size;
  anchors_.clear();

  int64_t kda_i = 0, mla_i = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (cancel_requested(opt)) throw Cancelled();
    const KimiLayerWeights& lw = weights_.layers[size_t(l)];
    // Attention input (AttnRes over the finished blocks and the running block sum).
    Buf a_in = h;
    if (B > 0) {
      if (!anchors_.empty()) {
        sources_.assign(anchors_.begin(), anchors_.end());
        sources_.push_back(h);
        d.attn_res(sources_, lw.attn_res_norm.v, lw.attn_res_proj.v, c.rms_norm_eps, mix);
        a_in = mix;
      }
      if (l % B == 0) {
        anchors_.push_back(d.scratch(BufType::F32, T, H));
        d.copy(anchors_.back(), h);
        d.fill(prefix, 0.0f);
      } else {
        d.copy(prefix, h);
      }
    }
    d.rmsnorm(a_in, lw.input_norm.v, c.rms_norm_eps, normed);
    attention(st, lw, kda_i, mla_i, base, opt, normed, attn_out);
    if (cancel_requested(opt)) throw Cancelled();
    if (lw.attn_kind == AttnKind::KDA) ++kda_i;
    else ++mla_i;
    // MLP input.
    Buf m_in;
    if (B > 0) {
      d.add(prefix, attn_out);
      sources_.assign(anchors_.begin(), anchors_.end());
      sources_.push_back(prefix);
      d.attn_res(sources_, lw.mlp_res_norm.v, lw.mlp_res_proj.v, c.rms_norm_eps, mix);
      m_in = mix;
    } else {
      d.add(h, attn_out);
      m_in = h;
    }
    d.rmsnorm(m_in, lw.post_norm.v, c.rms_norm_eps, normed);
    mlps_.predict_ahead(d, experts_, size_t(l), m_in);
    mlps_.forward(d, experts_, size_t(l), normed, mlp_out, &counters_);
    if (B > 0) d.sum(h, prefix, mlp_out);
    else d.add(h, mlp_out);
    if (captured > 0 && capture_slot_[size_t(l)] >= 0) d.copy(cap.cols_view(capture_slot_[size_t(l)] * H, H), h);
  }

  // Output: AttnRes over the anchors and the last block, final norm, lm_head.
  const int64_t rows = opt.all_logits ? T : 1;
  const int64_t first = T - rows;
  Buf fin = h.rows_view(first, rows);
  if (B > 0) {
    sources_.clear();
    for (const Buf& a : anchors_) sources_.push_back(a.rows_view(first, rows));
    sources_.push_back(h.rows_view(first, rows));
    fin = mix.rows_view(0, rows);
    d.attn_res(sources_, weights_.out_res_norm.v, weights_.out_res_proj.v, c.rms_norm_eps, fin);
  }
  Buf fn = d.scratch(BufType::F32, rows, H);
  d.rmsnorm(fin, weights_.final_norm.v, c.rms_norm_eps, fn);
  Buf lg = d.scratch(BufType::F32, rows, c.vocab_size);
  const device::LinearOut head[] = {{&weights_.lm_head, lg}};
  d.linear(fn, head);
  d.download(lg, logits);  // sync point: the logits
  if (captured > 0) d.download(cap, opt.capture->rows);  // sync point: the drafter's rows

  if (opt.record) {
    for (KimiState::Kda& k : st.kda) k.cur = 1 - k.cur;  // the pass's result becomes current
    st.record = {.valid = true, .rows = T, .length_before = base};
  }
  st.length_ = base + T;
  counters_.passes += 1;
  counters_.rows += T;
}

void KimiModel::commit_prefix(State& state, int64_t n) {
  KimiState& st = kimi_state(state);
  if (!st.record.valid) fail("commit_prefix without a recorded pass");
  if (n < 0 || n > st.record.rows) fail("commit_prefix(", n, ") outside 0..", st.record.rows);
  st.record.valid = false;
  if (n == st.record.rows) return;
  // Back to the state before the pass (still intact in the other copy), then the accepted rows.
  for (KimiState::Kda& k : st.kda) k.cur = 1 - k.cur;
  int64_t kda_i = 0;
  for (const KimiLayerWeights& lw : weights_.layers) {
    if (lw.attn_kind != AttnKind::KDA) continue;
    KimiState::Kda& k = st.kda[size_t(kda_i++)];
    device::KdaState cur = k.state(k.cur);
    dev_->kda_replay(lw.kda.op, cur, k.rec(), n);
  }
  st.length_ = st.record.length_before + n;
}

std::unique_ptr<Snapshot> KimiModel::new_snapshot() const {
  auto s = std::make_unique<KimiSnapshot>();
  const int64_t P = config_.kda_dim();
  for (size_t i = 0; i < size_t(config_.count_layers(AttnKind::KDA)); ++i) {
    s->conv.emplace_back(*dev_, BufType::F32, 3, P * (config_.conv_kernel - 1));
    s->S.emplace_back(*dev_, BufType::F32, config_.kda_heads, config_.kda_head_dim * config_.kda_head_dim);
  }
  return s;
}

void KimiModel::save(const State& state, Snapshot& snapshot) const {
  const KimiState& st = kimi_state(state);
  auto& snap = dynamic_cast<KimiSnapshot&>(snapshot);
  snap.length_ = st.length_;
  for (size_t i = 0; i < st.kda.size(); ++i) {
    const device::KdaState cur = st.kda[i].state(st.kda[i].cur);
    dev_->copy(snap.conv[i].buf(), cur.conv);
    dev_->copy(snap.S[i].buf(), cur.S);
  }
}

void KimiModel::restore(State& state, const Snapshot& snapshot) const {
  KimiState& st = kimi_state(state);
  const auto& snap = dynamic_cast<const KimiSnapshot&>(snapshot);
  // Only back: cache rows past the current length may have been overwritten since the save.
  SLUICE_CHECK(snap.length_ <= st.length_, "restore of a snapshot at ", snap.length_, " into a state at ", st.length_);
  st.length_ = snap.length_;
  for (size_t i = 0; i < st.kda.size(); ++i) {
    const device::KdaState cur = st.kda[i].state(st.kda[i].cur);
    dev_->copy(cur.conv, snap.conv[i].buf());
    dev_->copy(cur.S, snap.S[i].buf());
  }
  st.record.valid = false;
}

void KimiModel::write_state(const State& state, StateSink& out) const {
  const KimiState& st = kimi_state(state);
  StateWriter w(*dev_, out);
  w.head(info_.model_type, st.length_, int64_t(2 * (st.kda.size() + st.mla.size())));
  for (const KimiState::Kda& k : st.kda) {
    w.rows(k.state(k.cur).conv);
    w.rows(k.state(k.cur).S);
  }
  for (const KimiState::Mla& m : st.mla) {
    w.rows(m.latent.buf().rows_view(0, st.length_));
    w.rows(m.k_pe.buf().rows_view(0, st.length_));
  }
}

void KimiModel::read_state(State& state, StateSource& in) const {
  KimiState& st = kimi_state(state);
  st.reset();
  try {
    StateReader r(*dev_, in);
    uint64_t fixed = 0;
    for (const KimiState::Kda& k : st.kda) fixed += uint64_t(k.state(k.cur).conv.size() + k.state(k.cur).S.size());
    const uint64_t per_position = uint64_t(st.mla.size()) * uint64_t(config_.kv_lora_rank + config_.qk_rope_head_dim);
    const int64_t length = r.head(info_.model_type, int64_t(2 * (st.kda.size() + st.mla.size())), fixed, per_position);
    st.reserve(length);
    for (KimiState::Kda& k : st.kda) {
      r.rows(k.state(k.cur).conv, "a KDA conv window");
      r.rows(k.state(k.cur).S, "a KDA recurrent state");
    }
    for (KimiState::Mla& m : st.mla) {
      r.rows(m.latent.buf().rows_view(0, length), "an MLA latent cache");
      r.rows(m.k_pe.buf().rows_view(0, length), "an MLA k_pe cache");
    }
    st.length_ = length;
  } catch (...) {
    st.reset();
    throw;
  }
}

void KimiModel::write_recurrent(const State& state, StateSink& out) const {
  const KimiState& st = kimi_state(state);
  StateWriter w(*dev_, out);
  w.head(info_.model_type, st.length_, int64_t(2 * st.kda.size()));
  for (const KimiState::Kda& k : st.kda) {
    w.rows(k.state(k.cur).conv);
    w.rows(k.state(k.cur).S);
  }
}

void KimiModel::read_recurrent(State& state, StateSource& in) const {
  KimiState& st = kimi_state(state);
  try {
    StateReader r(*dev_, in);
    uint64_t fixed = 0;
    for (const KimiState::Kda& k : st.kda) fixed += uint64_t(k.state(k.cur).conv.size() + k.state(k.cur).S.size());
    const int64_t length = r.head(info_.model_type, int64_t(2 * st.kda.size()), fixed, 0);
    // Only back, as restore(): the cache rows below `length` must be this state's own.
    if (length > st.length_) fail("recurrent state at ", length, " over a state at ", st.length_);
    for (KimiState::Kda& k : st.kda) {
      r.rows(k.state(k.cur).conv, "a KDA conv window");
      r.rows(k.state(k.cur).S, "a KDA recurrent state");
    }
    st.length_ = length;
    st.record.valid = false;
  } catch (...) {
    st.reset();
    throw;
  }
}

std::vector<float> KimiModel::state_values(const State& state) const {
  const KimiState& st = kimi_state(state);
  std::vector<float> out{float(st.length_)};
  auto append = [&](const Buf& b) {
    const size_t at = out.size();
    out.resize(at + size_t(b.size()));
    if (b.size() > 0) dev_->download(b, out.data() + at);
  };
  for (const KimiState::Kda& k : st.kda) {
    append(k.state(k.cur).conv);
    append(k.state(k.cur).S);
  }
  for (const KimiState::Mla& m : st.mla) {
    append(m.latent.buf().rows_view(0, st.length_));
    append(m.k_pe.buf().rows_view(0, st.length_));
  }
  return out;
}

int64_t KimiModel::pass_bytes_per_row(bool record) const {
  const KimiConfig& c = config_;
  const int64_t H = c.hidden_size, P = c.kda_dim(), k = c.experts_per_token, R = c.expert_input_size();
  const int64_t anchors = c.attn_res_block_size > 0 ? c.num_layers / c.attn_res_block_size + 2 : 0;
  int64_t floats = 8 * H + anchors * H;                                   // h, prefix, mix, normed, outputs
  floats += 12 * P + 2 * c.kda_heads;                                     // KDA projections, conv, gates
  floats += c.num_heads * (c.qk_head_dim() + 2 * c.v_head_dim) + c.kv_lora_rank + c.qk_rope_head_dim;  // MLA
  floats += c.num_experts + R + k * R + 3 * R + 2 * c.moe_intermediate_size * std::max<int64_t>(1, k);  // MoE
  floats += 2 * std::max(c.intermediate_size, c.num_shared_experts * c.moe_intermediate_size);         // MLPs
  if (record) floats += c.count_layers(AttnKind::KDA) * (6 * P + c.kda_heads);
  return floats * int64_t(sizeof(float)) + 16 * k;
}

namespace {

std::unique_ptr<Target> load_kimi(const LoadOptions& opt) { return KimiModel::load(opt); }

}  // namespace

const Architecture kKimiArchitecture{"kimi", {"kimi_k3", "kimi_linear"}, load_kimi,
                                    bank_from_text<parse_kimi_config, kimi_expert_bank>,
                                    roster_from_text<parse_kimi_config, kimi_tensors, kimi_expert_bank>,
                                    kimi_tiny};

}  // namespace sluice::model
