// The Kimi hybrid family (model_type kimi_k3 with its text_config, and kimi_linear): embedding;
// per layer Block AttnRes (or plain residuals), KDA or MLA attention, a dense MLP or a MoE layer;
// final AttnRes, norm and lm_head. Written once against the device interface; one pass runs any
// number of new positions (prefill, decode, draft verification) with per-row results equal to
// running them one at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/arch/kimi_config.h"
#include "format/safetensors.h"
#include "model/blocks/kda.h"
#include "model/blocks/mla.h"
#include "model/blocks/mlp.h"
#include "model/blocks/moe.h"
#include "model/registry.h"
#include "model/target.h"
#include "model/tensor_list.h"
#include "store/expert_bank.h"

namespace sluice::store {
class ResidentExperts;
}

namespace sluice::model {

struct KimiLayerWeights {
  AttnKind attn_kind;
  MlpKind mlp_kind;
  Param input_norm, post_norm;
  Param attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;  // Block AttnRes only
  KdaWeights kda;
  MlaWeights mla;
  MlpWeights dense;
  MoeWeights moe;
};

struct KimiWeights {
  device::Weight embed, lm_head;
  Param final_norm, out_res_norm, out_res_proj;
  std::vector<KimiLayerWeights> layers;
};

// The Kimi family's one tensor list (every tensor a config implies, in checkpoint order), bound to
// `w` (null: a list for make-tiny only). The loader, make-tiny and the expert bank all use it.
TensorList kimi_tensors(const KimiConfig& c, KimiWeights* w);
// The routed experts a Kimi config implies.
store::ExpertBank kimi_expert_bank(const KimiConfig& c);
// make-tiny's hook (kimi_tiny.cpp): kimi_k3 or kimi_linear from the spec's kimi_* fields.
TinyConfig kimi_tiny(const TinyMoeSpec& spec);
// The registry entry of the family.
extern const Architecture kKimiArchitecture;

class KimiState;

class KimiModel final : public Target {
 public:
  // Loads config.json and the safetensors checkpoint, validating every tensor against the list.
  static std::unique_ptr<KimiModel> load(const LoadOptions& opt);
  static std::unique_ptr<KimiModel> load(const std::string& dir, bool resident_experts = true);
  ~KimiModel() override;

  const KimiConfig& config() const { return config_; }

  const TargetInfo& info() const override { return info_; }
  device::Device& device() const override { return *dev_; }
  const store::ExpertBank* expert_bank() const override { return bank_.empty() ? nullptr : &bank_; }
  void set_expert_provider(store::ExpertProvider* p) override;
  store::ExpertProvider* expert_provider() const override { return experts_; }

  std::unique_ptr<State> new_state() const override;
  void forward(State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) override;
  void commit_prefix(State& st, int64_t n) override;
  std::unique_ptr<Snapshot> new_snapshot() const override;
  void save(const State& st, Snapshot& snap) const override;
  void restore(State& st, const Snapshot& snap) const override;
  void write_state(const State& st, StateSink& out) const override;
  void read_state(State& st, StateSource& in) const override;
  void write_recurrent(const State& st, StateSink& out) const override;
  void read_recurrent(State& st, StateSource& in) const override;
  std::vector<float> state_values(const State& st) const override;
  int64_t pass_bytes_per_row(bool record) const override;
  const TargetCounters& counters() const override { return counters_; }
  const device::Weight& embedding() const override { return weights_.embed; }
  const device::Weight& lm_head() const override { return weights_.lm_head; }

 private:
  KimiModel() = default;
  void attention(KimiState& st, const KimiLayerWeights& lw, int64_t kda_i, int64_t mla_i, int64_t base,
                 const PassOptions& opt, const device::Buf& x, device::Buf out);

  KimiConfig config_;
  TargetInfo info_;
  device::Device* dev_ = nullptr;
  format::TensorSet tensors_;
  KimiWeights weights_;
  store::ExpertBank bank_;
  std::unique_ptr<store::ResidentExperts> resident_;
  store::ExpertProvider* experts_ = nullptr;
  TargetCounters counters_;
  MlaSpec mla_spec_;
  MlpStack mlps_;  // every layer's MLP or MoE

  // Host-side tables reused across passes (reserved at load).
  std::vector<device::Buf> anchors_, sources_;
  std::vector<int> capture_slot_;  // per layer: its slot in the HiddenCapture rows, or -1
};

}  // namespace sluice::model
