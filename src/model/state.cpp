// Sequence state allocation, snapshot and restore.
#include "model/state.h"

#include <algorithm>

namespace sluice::model {

SequenceState::SequenceState(const format::KimiConfig& c) : config_(&c) {
  const int64_t P = c.kda_dim();
  for (auto kind : c.attn) {
    if (kind == format::AttnKind::KDA) {
      KdaLayerState s;
      s.conv.assign(size_t(3 * P * (c.conv_kernel - 1)), 0.0f);
      s.S.assign(size_t(c.kda_heads * c.kda_head_dim * c.kda_head_dim), 0.0f);
      kda.push_back(std::move(s));
    } else {
      mla.emplace_back();
    }
  }
  reserve(256);
}

void SequenceState::reset() {
  for (auto& s : kda) {
    std::fill(s.conv.begin(), s.conv.end(), 0.0f);
    std::fill(s.S.begin(), s.S.end(), 0.0f);
  }
  length_ = 0;
  record.valid = false;
}

SequenceState::Snapshot SequenceState::snapshot() const { return Snapshot{length_, kda}; }

void SequenceState::restore(const Snapshot& s) {
  length_ = s.length;
  for (size_t i = 0; i < kda.size(); ++i) {
    std::copy(s.kda[i].conv.begin(), s.kda[i].conv.end(), kda[i].conv.begin());
    std::copy(s.kda[i].S.begin(), s.kda[i].S.end(), kda[i].S.begin());
  }
  record.valid = false;
}

void SequenceState::reserve(int64_t positions) {
  if (positions <= capacity_) return;
  int64_t cap = std::max<int64_t>(positions, capacity_ * 2);
  for (auto& m : mla) {
    m.latent.resize(size_t(cap * config_->kv_lora_rank));
    m.k_pe.resize(size_t(cap * config_->qk_rope_head_dim));
  }
  capacity_ = cap;
}

}  // namespace sluice::model
