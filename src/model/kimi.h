// A loaded Kimi-family model (kimi_k3 or kimi_linear): config, resident non-expert weights, an
// ExpertProvider for routed experts, and the forward pass over a SequenceState. One pass runs
// any number of new positions (prefill, decode, draft verification) with per-row results equal
// to running them one at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/kimi_config.h"
#include "format/safetensors.h"
#include "model/kimi_weights.h"
#include "model/layers.h"
#include "model/pass_options.h"
#include "model/state.h"
#include "model/weight_load.h"
#include "store/resident_experts.h"

namespace sluice::model {

// Running totals the model keeps for --stats.
struct ModelCounters {
  int64_t passes = 0, rows = 0;
  MoeCounters moe;
};

class KimiModel {
 public:
  // Loads config.json and the safetensors checkpoint in `dir`, validating every tensor.
  // With resident_experts = false the checkpoint's expert tensors are not touched and an expert
  // provider must be set before the first forward pass (the streaming store).
  static std::unique_ptr<KimiModel> load(const std::string& dir, bool resident_experts = true);

  const format::KimiConfig& config() const { return config_; }
  SequenceState new_state() const { return SequenceState(config_); }

  // Replaces the resident expert source (the streaming store plugs in here). Not owned.
  void set_expert_provider(ExpertProvider* p) { experts_ = p ? p : resident_.get(); }
  ExpertProvider* expert_provider() const { return experts_; }

  // Runs `tokens` at positions st.length().. and advances the state by tokens.size().
  // logits receives [rows, vocab] floats, rows = tokens.size() if all_logits else 1.
  void forward(SequenceState& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits);

  // After a pass run with record = true, keeps its first n rows (0 <= n <= rows) and drops the
  // rest, leaving the state exactly as if only those n rows had been run.
  void commit_prefix(SequenceState& st, int64_t n) const;

  const ModelCounters& counters() const { return counters_; }

  // The embedding rows of `tokens` into h [T, hidden] (throws for an id outside the vocabulary)
  // and the lm_head: a draft model that shares them (DSpark) uses these.
  void embed(std::span<const int32_t> tokens, float* h) const { embed_tokens(weights_.embed, tokens, h); }
  const Weight& lm_head() const { return weights_.lm_head; }

  // Scratch bytes one row of a pass needs (activations, anchors, per-row expert outputs, the
  // KDA record of a verify pass): a prefill chunk is sized from a memory budget with it.
  int64_t pass_bytes_per_row(bool record) const;

 private:
  KimiModel() = default;
  void predict_next_layer(int next, const float* m_in, int64_t T);

  format::KimiConfig config_;
  format::TensorSet tensors_;
  KimiWeights weights_;
  std::unique_ptr<store::ResidentExperts> resident_;
  ExpertProvider* experts_ = nullptr;
  ModelCounters counters_;

  // Scratch reused across passes (allocated once, grown as needed).
  KdaScratch kda_scratch_;
  MlaScratch mla_scratch_;
  MlpScratch mlp_scratch_;
  MoeScratch moe_scratch_;
  MoeScratch predict_scratch_;
  FloatBuffer predict_in_;
  FloatBuffer h_, prefix_, attn_in_, normed_, attn_out_, mlp_in_, mlp_out_, final_;
  std::vector<FloatBuffer> anchors_;
  std::vector<int> capture_slot_;  // per layer: its slot in the HiddenCapture rows, or -1
};

}  // namespace sluice::model
