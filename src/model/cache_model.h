// What every pre-norm decoder whose per-sequence state is only attention caches shares (Qwen3 and
// Qwen3-MoE, gpt-oss, DeepSeek-V3/Kimi-K2):
//  - the state: per layer up to two device caches with one row per position (GQA keys and values,
//    or MLA latents and k_pe), which a pass writes at rows length..length+T-1 and attention reads
//    below the length. Rows past the length are never read before being overwritten, so
//    commit_prefix, truncate and restore are a length cut; a snapshot is a length; a state's
//    bytes are its length and each cache's rows below it;
//  - the pass: h = embed(tokens); per layer h += attention(norm₁(h)), h += mlp(norm₂(h)) (the
//    next MoE layer's experts predicted from norm₂'s input first); logits = lm_head(norm(h)). An
//    architecture supplies its attention block, its layers' MLPs (MlpStack) and the weights around
//    them;
//  - the routed experts' bank and provider plumbing.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/rope_params.h"
#include "format/safetensors.h"
#include "model/blocks/moe.h"
#include "model/target.h"
#include "model/tensor_list.h"
#include "store/expert_bank.h"

namespace sluice::store {
class ResidentExperts;
}

namespace sluice::model {

// Column widths of one layer's two caches (0: that cache is absent).
struct CacheWidths {
  int64_t first = 0, second = 0;
};

class CacheState final : public State {
 public:
  CacheState(device::Device& d, std::vector<CacheWidths> widths);
  int64_t length() const override { return length_; }
  void reset() override;
  // Room for `positions` rows in every cache (grows geometrically, keeping the rows held).
  void reserve(int64_t positions);
  const device::Buf& first(size_t layer) const { return caches_[layer].first.buf(); }
  const device::Buf& second(size_t layer) const { return caches_[layer].second.buf(); }

 private:
  friend class CacheModel;
  struct Layer {
    device::DeviceBuffer first, second;
  };
  device::Device& dev_;
  std::vector<CacheWidths> widths_;
  std::vector<Layer> caches_;
  int64_t length_ = 0, capacity_ = 0;
  bool record_valid_ = false;
  int64_t record_rows_ = 0, record_before_ = 0;
};

class CacheModel : public Target {
 public:
  ~CacheModel() override;

  const TargetInfo& info() const override { return info_; }
  device::Device& device() const override { return *dev_; }
  const store::ExpertBank* expert_bank() const override { return bank_.empty() ? nullptr : &bank_; }
  void set_expert_provider(store::ExpertProvider* p) override;
  store::ExpertProvider* expert_provider() const override { return experts_; }

  std::unique_ptr<State> new_state() const override;
  void forward(State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) final;
  void commit_prefix(State& st, int64_t n) override;
  bool truncate(State& st, int64_t n) const override;
  std::unique_ptr<Snapshot> new_snapshot() const override;
  void save(const State& st, Snapshot& snap) const override;
  void restore(State& st, const Snapshot& snap) const override;
  bool can_truncate() const override { return true; }
  void write_state(const State& st, StateSink& out) const override;
  void read_state(State& st, StateSource& in) const override;
  std::vector<float> state_values(const State& st) const override;
  const TargetCounters& counters() const override { return counters_; }

 protected:
  // The weights around the layers and the pass-wide RoPE table (rope_dim columns, 0: none).
  struct Decoder {
    device::Weight embed, lm_head;
    device::Vec final_norm;
    std::vector<device::Vec> input_norm, post_norm;  // per layer
    float eps = 1e-6f;
    int64_t vocab = 0, hidden = 0;
    device::RopeSpec rope;
    int64_t rope_dim = 0;
  };
  // Layer `layer`'s attention of x (the normed rows at positions base..) into out, reading and
  // writing its caches in st; rope is the pass's [T, rope_dim] cos/sin table.
  virtual void attention(CacheState& st, size_t layer, int64_t base, const device::Buf& rope,
                         const PassOptions& opt, const device::Buf& x, device::Buf out) = 0;

  CacheModel();
  // Checks the state's kind, reserves room for T more rows and starts a pass at its length (the
  // returned base position).
  int64_t begin_pass(CacheState& st, int64_t T);
  // Advances the length by T and keeps what commit_prefix needs of a recorded pass.
  void end_pass(CacheState& st, int64_t T, bool record);
  static CacheState& cache_state(State& s);
  // The decoder around the layers: their input and post-attention norms (each layer's
  // `input_norm` and `post_norm` Params), the final norm, embedding and lm_head, and transformers'
  // RoPE of `rope_dim` channels (plain or YaRN, fp32 frequencies, cos/sin magnitude).
  template <class LayerWeights>
  void set_decoder(const device::Weight& embed, const device::Weight& lm_head, const Param& final_norm,
                   const std::vector<LayerWeights>& layers, float eps, int64_t vocab, int64_t hidden,
                   const format::RopeParams& rope, int64_t rope_dim) {
    Decoder& dc = decoder_;
    dc.embed = embed;
    dc.lm_head = lm_head;
    dc.final_norm = final_norm.v;
    for (const LayerWeights& lw : layers) {
      dc.input_norm.push_back(lw.input_norm.v);
      dc.post_norm.push_back(lw.post_norm.v);
    }
    dc.eps = eps;
    dc.vocab = vocab;
    dc.hidden = hidden;
    dc.rope.inv_freq = format::rope_inv_freq(rope, rope_dim);
    dc.rope.magnitude = float(format::rope_attention_factor(rope));
    dc.rope.f64_angles = false;
    dc.rope_dim = rope_dim;
  }
  // Every layer's MLP (mlps_, MlpStack::bind), the dense ones with SiLU as in every family here.
  template <class LayerWeights, class IsMoe>
  void set_mlps(const std::vector<LayerWeights>& layers, IsMoe is_moe, const MlpWeights LayerWeights::*dense,
                const MoeSpec& moe, float eps) {
    mlps_.bind(layers, is_moe, dense, moe, {.kind = device::ActKind::SiLU}, eps);
  }
  // Serves the bank's experts from the mapped checkpoint (on dev_) unless `resident` is false; the
  // provider defaults to them.
  void open_experts(const format::TensorSet& ts, bool resident);
  // Throws when the model has routed experts and no provider.
  void require_experts() const;

  TargetInfo info_;
  device::Device* dev_ = nullptr;
  Decoder decoder_;
  MlpStack mlps_;  // every layer's MLP or MoE (filled by the architecture's loader)
  std::vector<CacheWidths> cache_widths_;  // per layer
  store::ExpertBank bank_;
  std::unique_ptr<store::ResidentExperts> resident_;
  store::ExpertProvider* experts_ = nullptr;
  TargetCounters counters_;
  std::vector<int> capture_slot_;  // per layer: its slot in the HiddenCapture rows, or -1
};

}  // namespace sluice::model
