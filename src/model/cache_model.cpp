// Cache-only sequence state: allocation and growth of the per-layer caches, the length cuts that
// commit, truncate and restore, a state as bytes, and the expert provider of the architectures
// built on it.
#include "model/cache_model.h"

#include <algorithm>

#include "core/error.h"
#include "model/tensor_list.h"
#include "store/resident_experts.h"

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::DeviceBuffer;

namespace {

class CacheSnapshot final : public Snapshot {
 public:
  int64_t length() const override { return length_; }
  int64_t length_ = 0;
};

}  // namespace

CacheState::CacheState(device::Device& d, std::vector<CacheWidths> widths)
    : dev_(d), widths_(std::move(widths)), caches_(widths_.size()) {
  reserve(256);
}

void CacheState::reset() {
  length_ = 0;
  record_valid_ = false;
}

void CacheState::reserve(int64_t positions) {
  if (positions <= capacity_) return;
  const int64_t cap = std::max<int64_t>(positions, capacity_ * 2);
  auto grow = [&](DeviceBuffer& b, int64_t cols) {
    if (cols == 0) return;
    DeviceBuffer n(dev_, BufType::F32, cap, cols);
    if (length_ > 0) dev_.copy(n.buf().rows_view(0, length_), b.buf().rows_view(0, length_));
    b = std::move(n);
  };
  for (size_t l = 0; l < caches_.size(); ++l) {
    grow(caches_[l].first, widths_[l].first);
    grow(caches_[l].second, widths_[l].second);
  }
  capacity_ = cap;
}

CacheModel::CacheModel() = default;
CacheModel::~CacheModel() = default;

CacheState& CacheModel::cache_state(State& s) {
  auto* c = dynamic_cast<CacheState*>(&s);
  SLUICE_CHECK(c, "a state of another architecture was passed to a cache-state model");
  return *c;
}

void CacheModel::set_expert_provider(store::ExpertProvider* p) { experts_ = p ? p : resident_.get(); }

void CacheModel::open_experts(const format::TensorSet& ts, bool resident) {
  if (bank_.empty() || !resident) return;
  resident_ = std::make_unique<store::ResidentExperts>(bank_, ts, dev_);
  experts_ = resident_.get();
}

void CacheModel::require_experts() const {
  if (!bank_.empty() && !experts_) fail("no expert source: load with resident experts or set a provider");
}

std::unique_ptr<State> CacheModel::new_state() const { return std::make_unique<CacheState>(*dev_, cache_widths_); }

void CacheModel::forward(State& state, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) {
  CacheState& st = cache_state(state);
  const Decoder& dc = decoder_;
  device::Device& d = *dev_;
  const int64_t T = int64_t(tokens.size()), H = dc.hidden, L = int64_t(dc.input_norm.size());
  check_token_ids(tokens, dc.vocab);
  require_experts();
  const int64_t captured = capture_slots(opt.capture, L, capture_slot_);
  const int64_t base = begin_pass(st, T);

  device::ScratchScope pass(d);
  Buf table = dc.rope_dim > 0 ? d.scratch(BufType::F32, T, dc.rope_dim) : Buf{};
  if (dc.rope_dim > 0) d.rope_table(dc.rope, base, table);
  Buf h = d.scratch(BufType::F32, T, H);
  d.embed(dc.embed, tokens, h);
  Buf normed = d.scratch(BufType::F32, T, H);
  Buf out = d.scratch(BufType::F32, T, H);
  Buf cap = captured > 0 ? d.scratch(BufType::F32, T, captured * H) : Buf{};
  for (int64_t l = 0; l < L; ++l) {
    if (cancel_requested(opt)) throw Cancelled();
    const size_t li = size_t(l);
    d.rmsnorm(h, dc.input_norm[li], dc.eps, normed);
    attention(st, li, base, table, opt, normed, out);
    d.add(h, out);
    if (cancel_requested(opt)) throw Cancelled();
    mlps_.predict_ahead(d, experts_, li, h);
    d.rmsnorm(h, dc.post_norm[li], dc.eps, normed);
    mlps_.forward(d, experts_, li, normed, out, &counters_);
    d.add(h, out);
    if (captured > 0 && capture_slot_[li] >= 0) d.copy(cap.cols_view(capture_slot_[li] * H, H), h);
  }
  const int64_t rows = opt.all_logits ? T : 1;
  const int64_t first = T - rows;
  Buf fn = d.scratch(BufType::F32, rows, H);
  d.rmsnorm(h.rows_view(first, rows), dc.final_norm, dc.eps, fn);
  Buf lg = d.scratch(BufType::F32, rows, dc.vocab);
  const device::LinearOut head[] = {{&dc.lm_head, lg}};
  d.linear(fn, head);
  d.download(lg, logits);                                // sync point: the logits
  if (captured > 0) d.download(cap, opt.capture->rows);  // sync point: a drafter's rows
  end_pass(st, T, opt.record);
}

int64_t CacheModel::begin_pass(CacheState& st, int64_t T) {
  if (T == 0) fail("forward pass with no tokens");
  st.reserve(st.length_ + T);
  st.record_valid_ = false;
  return st.length_;
}

void CacheModel::end_pass(CacheState& st, int64_t T, bool record) {
  const int64_t base = st.length_;
  st.length_ = base + T;
  if (record) {
    st.record_valid_ = true;
    st.record_rows_ = T;
    st.record_before_ = base;
  }
  counters_.passes += 1;
  counters_.rows += T;
}

void CacheModel::commit_prefix(State& state, int64_t n) {
  CacheState& st = cache_state(state);
  if (!st.record_valid_) fail("commit_prefix without a recorded pass");
  if (n < 0 || n > st.record_rows_) fail("commit_prefix(", n, ") outside 0..", st.record_rows_);
  st.record_valid_ = false;
  st.length_ = st.record_before_ + n;
}

bool CacheModel::truncate(State& state, int64_t n) const {
  CacheState& st = cache_state(state);
  if (n < 0 || n > st.length_) fail(info_.model_type, " truncate(", n, ") outside 0..", st.length_);
  st.length_ = n;
  st.record_valid_ = false;
  return true;
}

std::unique_ptr<Snapshot> CacheModel::new_snapshot() const { return std::make_unique<CacheSnapshot>(); }

void CacheModel::save(const State& st, Snapshot& snap) const { dynamic_cast<CacheSnapshot&>(snap).length_ = st.length(); }

void CacheModel::restore(State& st, const Snapshot& snap) const { truncate(st, snap.length()); }

void CacheModel::write_state(const State& state, StateSink& out) const {
  const CacheState& st = cache_state(const_cast<State&>(state));
  StateWriter w(*dev_, out);
  int64_t buffers = 0;
  for (const CacheWidths& cw : st.widths_) buffers += (cw.first > 0) + (cw.second > 0);
  w.head(info_.model_type, st.length_, buffers);
  for (const CacheState::Layer& layer : st.caches_)
    for (const DeviceBuffer* b : {&layer.first, &layer.second})
      if (!b->empty()) w.rows(b->buf().rows_view(0, st.length_));
}

void CacheModel::read_state(State& state, StateSource& in) const {
  CacheState& st = cache_state(state);
  st.reset();
  try {
    StateReader r(*dev_, in);
    int64_t buffers = 0, per_position = 0;
    for (const CacheWidths& cw : st.widths_) {
      buffers += (cw.first > 0) + (cw.second > 0);
      per_position += cw.first + cw.second;
    }
    const int64_t length = r.head(info_.model_type, buffers, 0, uint64_t(per_position));
    st.reserve(length);
    for (const CacheState::Layer& layer : st.caches_)
      for (const DeviceBuffer* b : {&layer.first, &layer.second})
        if (!b->empty()) r.rows(b->buf().rows_view(0, length), "a cache");
    st.length_ = length;
  } catch (...) {
    st.reset();
    throw;
  }
}

std::vector<float> CacheModel::state_values(const State& state) const {
  const CacheState& st = cache_state(const_cast<State&>(state));
  std::vector<float> out{float(st.length_)};
  for (size_t l = 0; l < st.caches_.size(); ++l)
    for (const DeviceBuffer* b : {&st.caches_[l].first, &st.caches_[l].second}) {
      if (b->empty()) continue;
      const size_t at = out.size();
      out.resize(at + size_t(st.length_ * b->buf().cols));
      if (st.length_ > 0) dev_->download(b->buf().rows_view(0, st.length_), out.data() + at);
    }
  return out;
}

}  // namespace sluice::model
