// The K3-native DSpark block drafter (spec §5.2): target hidden rows of committed positions enter
// as compact MLA cache entries (context_proj, RMSNorm, per layer kv_a, normalised latent and
// RoPE'd k_pe); a proposal runs the target's embeddings of [pending, mask...] through pre-norm
// MLA + SiLU-MLP layers where the query rows see every cached row and each other (no mask), then
// the target's lm_head, a markov head and a confidence head. Weights are mapped BF16, math fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/dspark_config.h"
#include "format/safetensors.h"
#include "device/device.h"
#include "model/blocks/mlp.h"
#include "model/target.h"
#include "model/tensor_list.h"

namespace sluice::model {

struct DSparkLayerWeights {
  Param input_norm, post_norm, q_a_norm, kv_a_norm;
  device::Weight q_a, q_b, kv_a, kv_b, o;
  MlpWeights mlp;
};

struct DSparkWeights {
  device::Weight context_proj;  // [H, n_target_layers·H]
  Param context_norm, final_norm;
  std::vector<DSparkLayerWeights> layers;
  device::Weight markov_w1, markov_w2;  // both [V, markov_rank]
  Param confidence_w;                    // [H + markov_rank]
  Param confidence_b;                    // [1]
  Param confidence_w_row, confidence_w_markov;  // its [H] and [markov_rank] parts
};

// Every tensor of a DSpark checkpoint (68 for K3's five layers), bound to `w` (null: for make-tiny).
TensorList dspark_tensors(const DSparkConfig& c, DSparkWeights* w);

// What one proposal produced, row j predicting the token after row j's input.
struct DSparkProposal {
  std::vector<int32_t> tokens;
  std::vector<float> confidence;  // the confidence head's raw output (a logit; σ gives a probability)
};

class DSparkModel {
 public:
  // Loads `dir` (config.json + safetensors) and checks it against the target it will draft for:
  // equal hidden size and vocabulary, target layer ids inside the target. The target must outlive
  // the drafter (its embedding and lm_head are used; DSpark's own embed_tokens is redundant). It
  // runs on the target's device.
  static std::unique_ptr<DSparkModel> load(const std::string& dir, const Target& target);

  const DSparkConfig& config() const { return config_; }

  // Positions held in the compact cache (the committed target positions seen so far).
  int64_t context_length() const { return length_; }
  // Forgets every position from n on (0 <= n <= context_length()).
  void truncate(int64_t n);
  // Appends n target rows [n, config().context_width()] at positions context_length()...
  void append_context(const float* rows, int64_t n);

  // Proposes up to min(max_tokens, num_draft_tokens) tokens following `pending`, which sits at
  // position context_length(). The block always has num_draft_tokens query rows (the size it was
  // trained with; rows see each other, so a shorter block would change every row). A positive
  // min_confidence stops at the first draft whose σ(confidence) is below it. base_logits
  // (optional) receives the lm_head logits of every query row [num_draft_tokens, V] before the
  // markov bias.
  DSparkProposal propose(int32_t pending, int max_tokens, double min_confidence = 0.0,
                         std::vector<float>* base_logits = nullptr);

  // The cache of DSpark layer i, downloaded: [context_length(), kv_lora_rank] latents and
  // [context_length(), qk_rope_head_dim] rotated k_pe (tests compare caches).
  std::vector<float> cache_latent(int64_t i) const;
  std::vector<float> cache_k_pe(int64_t i) const;

 private:
  DSparkModel() = default;
  struct LayerCache {
    device::DeviceBuffer latent, k_pe;  // capacity rows; the first length_ are valid
  };
  void reserve(int64_t positions);
  // Writes the normalised latent and the rotated k_pe of layer i's kv_a output rows `kv` [n, kvr+rope]
  // at positions first..first+n-1 of the cache (query rows go past length_ and are never kept).
  void store_kv(int64_t i, const device::Buf& kv, int64_t first);
  void attention(const DSparkLayerWeights& w, int64_t layer, const device::Buf& x, device::Buf out);

  DSparkConfig config_;
  format::TensorSet tensors_;
  DSparkWeights weights_;
  const Target* target_ = nullptr;
  device::Device* dev_ = nullptr;
  device::RopeSpec rope_;  // interleaved pairs, YaRN frequencies, double-precision angles, mscale
  float softmax_scale_ = 1.0f;
  std::vector<LayerCache> caches_;
  std::vector<int32_t> block_;  // token ids of the query rows
  int64_t length_ = 0, capacity_ = 0;
  std::vector<float> bias_host_;  // one row's biased logits (the markov decision is made on the host)
};

}  // namespace sluice::model
