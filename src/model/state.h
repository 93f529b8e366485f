// Per-sequence state of the Kimi family: KDA conv windows and recurrent matrices (constant size)
// and the compact MLA cache (latent + k_pe per position). Snapshot/restore give rollback; the
// pass record lets commit_prefix keep the first n rows of a multi-row (verify) pass exactly.
#pragma once
#include <cstdint>
#include <vector>

#include "format/kimi_config.h"

namespace sluice::model {

struct KdaLayerState {
  std::vector<float> conv;  // q, k, v windows: 3 × [P, K-1] raw inputs, oldest first
  std::vector<float> S;     // [heads, dk, dv] recurrent state (row = key channel)
};

struct MlaLayerState {
  std::vector<float> latent;  // [capacity, kv_lora_rank], normalised latents
  std::vector<float> k_pe;    // [capacity, qk_rope_head_dim], shared key part (no rotation)
};

// What a recorded pass keeps per KDA layer and row so that commit_prefix can replay the
// recurrence over the accepted rows bit for bit: the raw q/k/v projections (for the conv
// window) and the post-conv, normalised k and v, the log-decay g and β.
struct KdaRowRecord {
  std::vector<float> raw;   // [T, 3P]
  std::vector<float> k, v;  // [T, P]
  std::vector<float> g;     // [T, P]
  std::vector<float> beta;  // [T, heads]
};

class SequenceState {
 public:
  explicit SequenceState(const format::KimiConfig& c);

  int64_t length() const { return length_; }
  void reset();

  struct Snapshot {
    int64_t length = 0;
    std::vector<KdaLayerState> kda;
  };
  Snapshot snapshot() const;
  // Rolls back to `s`; MLA rows past s.length become invisible and are overwritten later.
  void restore(const Snapshot& s);
  // Makes room for `positions` MLA rows (grows geometrically; called before a pass).
  void reserve(int64_t positions);

  // Indexed by the ordinal of the layer among layers of its kind.
  std::vector<KdaLayerState> kda;
  std::vector<MlaLayerState> mla;

  // Set by a recorded pass: the state before it, the rows it ran and what replay needs.
  struct PassRecord {
    bool valid = false;
    int64_t rows = 0;
    Snapshot before;
    std::vector<KdaRowRecord> kda;
  } record;

  int64_t length_ = 0;
  int64_t capacity_ = 0;

 private:
  const format::KimiConfig* config_;
};

}  // namespace sluice::model
