// A loaded Qwen3 dense model (transformers' Qwen3ForCausalLM): config, BF16/F32 weights used in
// place from the mapped checkpoint, and the forward pass over a Qwen3State (a KV cache). One
// pass runs any number of new positions with per-row results equal, bit for bit, to running
// them one at a time; the cache can be cut back to any prefix. sluice uses it as a draft model.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/arena.h"
#include "format/qwen3_config.h"
#include "format/safetensors.h"
#include "kernels/cpu/kernels.h"
#include "model/layers.h"
#include "model/pass_options.h"

namespace sluice::model {

// Per-sequence state: per layer, keys (after k_norm and RoPE) and values of every position.
class Qwen3State {
 public:
  explicit Qwen3State(const format::Qwen3Config& c);

  int64_t length() const { return length_; }
  // Keeps the first n positions (0 <= n <= length()): the state is then exactly that of a
  // sequence that only ever saw those n tokens.
  void truncate(int64_t n);
  void reset() { truncate(0); }

  struct Snapshot {
    int64_t length = 0;
  };
  Snapshot snapshot() const { return Snapshot{length_}; }
  void restore(const Snapshot& s) { truncate(s.length); }

 private:
  friend class Qwen3Model;
  void reserve(int64_t positions);
  int64_t kv_dim_ = 0;
  int64_t length_ = 0, capacity_ = 0;
  std::vector<std::vector<float>> k_, v_;  // per layer [capacity, kv_dim]
};

class Qwen3Model {
 public:
  // Loads config.json and the safetensors checkpoint in `dir`, checking every tensor's name,
  // dtype and shape against the config. Throws naming the directory and tensor or field.
  static std::unique_ptr<Qwen3Model> load(const std::string& dir);

  const format::Qwen3Config& config() const { return config_; }
  Qwen3State new_state() const { return Qwen3State(config_); }

  // Runs `tokens` at positions st.length().. and advances the state by tokens.size().
  // logits receives [rows, vocab] floats, rows = tokens.size() if all_logits else 1.
  // (opt.record is not needed: truncate() undoes any suffix of a pass.)
  void forward(Qwen3State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits);

 private:
  struct Layer {
    kernels::Weight q, k, v, o;
    MlpWeights mlp;
    std::vector<float> input_norm, post_norm, q_norm, k_norm;
  };

  Qwen3Model() = default;
  void attention(const Layer& w, Qwen3State& st, size_t layer, int64_t base, int64_t T, const float* x, float* out);

  format::Qwen3Config config_;
  format::TensorSet tensors_;
  kernels::Weight embed_, lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;  // RoPE frequencies, [head_dim / 2]

  // Scratch reused across passes (grown as needed).
  FloatBuffer h_, normed_, q_, k_, v_, attn_, out_, final_, cos_, sin_, scores_;
  MlpScratch mlp_scratch_;
};

}  // namespace sluice::model
