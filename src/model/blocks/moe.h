// A mixture-of-experts layer: the router of the pass's rows (its logits in the same launch as the
// latent down-projection), the route ids downloaded (the layer's sync point: the host decides which
// experts to ask for), every expert of the pass's union asked of the ExpertProvider once and run
// over all rows routed to it as it arrives, the per-row combine in route order, K3's latent
// projection around the experts, and the shared experts. Also the next-layer route prediction that
// starts expert reads early.
#pragma once
#include <cstdint>
#include <vector>

#include "device/device.h"
#include "model/blocks/mlp.h"
#include "model/target.h"
#include "model/tensor_list.h"
#include "store/expert_provider.h"

namespace sluice::model {

struct MoeWeights {
  device::Weight router, latent_down, latent_up;  // latent_* only for K3's latent MoE
  Param correction_bias, latent_norm;
  MlpWeights shared;
  bool has_shared = false;
};

struct MoeSpec {
  device::RouterOp router;      // its correction_bias view is each layer's (MoeWeights)
  device::Activation act;       // of the routed and the shared experts
  int64_t expert_input = 0;      // width the experts see (the latent width, or hidden)
  bool latent = false;           // K3: experts run in a projected space
  float norm_eps = 1e-5f;        // the latent norm
};

// Host-side tables of one MoE pass, kept across passes so that a pass allocates nothing once they
// have reached their size.
struct MoeHost {
  std::vector<int32_t> route;    // [T, k] expert ids, route order
  std::vector<int32_t> uni;      // the union of experts, ascending
  std::vector<int64_t> offsets;  // members of uni[i]: members[offsets[i] .. offsets[i+1])
  std::vector<int64_t> members;  // (row·k + slot) grouped by expert, ascending within each
  std::vector<int32_t> votes, chosen, best_rank;  // prediction
  std::vector<device::ExpertView> views;               // a group's views, for devices that group experts
  std::vector<std::span<const int64_t>> view_members;   // and their member lists
  // Experts a GPU host's plan computes on its cores (ExpertView::compute_on_host): their views and
  // member lists, the pass's z on the host, and the gathered inputs and outputs of their members.
  std::vector<device::ExpertView> host_views;
  std::vector<std::span<const int64_t>> host_members;
  std::vector<float> z, zc, yc;
  std::vector<int64_t> host_ids;
  std::vector<std::span<const int64_t>> host_lists;
  void reserve(int64_t experts, int64_t slots);
};

void moe_forward(device::Device& d, const MoeSpec& s, const MoeWeights& w, store::ExpertProvider& experts, int layer,
                 const device::Buf& x, device::Buf out, MoeHost& host, TargetCounters* counters);

// Layer `layer`'s own norm and router applied to the MLP input m_in of the layer `distance` layers
// before it: a guess at its routes, handed to the provider as a prefetch in confidence order (most
// rows first, then the best rank any row gave it, then the lower id; capped at what the provider
// holds at once); the real router decides at that layer.
void moe_predict(device::Device& d, const MoeSpec& s, const MoeWeights& w, const Param& post_norm, float eps,
                 store::ExpertProvider& experts, int layer, const device::Buf& m_in, MoeHost& host, int distance);

// One layer's MLP as a pass sees it: its MoE (null: a dense layer, `dense`) and the norm in front
// of it.
struct MlpLayer {
  const MoeWeights* moe = nullptr;
  const MlpWeights* dense = nullptr;
  const Param* post_norm = nullptr;
};

// The MLPs of a model's layers and what its MoE layers share across passes: the one place a pass
// runs an MLP and looks ahead at the next layers' experts, for every architecture.
struct MlpStack {
  std::vector<MlpLayer> layers;
  MoeSpec moe;                    // the MoE layers'
  device::Activation dense_act;  // the dense layers'
  float eps = 1e-6f;              // the post-attention norm's
  MoeHost host;

  // Binds every layer's MLP: layer l's `moe` where is_moe(l), else its dense MLP (the member
  // `dense`; null: the model has none), each after its `post_norm`; sizes the host tables.
  template <class LayerWeights, class IsMoe>
  void bind(const std::vector<LayerWeights>& weights, IsMoe is_moe, const MlpWeights LayerWeights::*dense,
            const MoeSpec& moe_spec, const device::Activation& dense_activation, float norm_eps) {
    moe = moe_spec;
    dense_act = dense_activation;
    eps = norm_eps;
    host.reserve(moe.router.experts, 64 * moe.router.top_k);
    layers.clear();
    for (size_t l = 0; l < weights.size(); ++l) {
      const LayerWeights& lw = weights[l];
      layers.push_back({is_moe(l) ? &lw.moe : nullptr, dense ? &(lw.*dense) : nullptr, &lw.post_norm});
    }
  }

  // Before layer `layer`'s MLP, whose input (before its norm) is m_in: guesses at the routes of
  // the MoE layers among the next experts->lookahead() ones (the next layer's, and while the
  // drives would otherwise idle, the ones after it), each from its own norm and router.
  void predict_ahead(device::Device& d, store::ExpertProvider* experts, size_t layer, const device::Buf& m_in);
  // Layer `layer`'s MoE or dense MLP of x (normed) into out.
  void forward(device::Device& d, store::ExpertProvider* experts, size_t layer, const device::Buf& x, device::Buf out,
               TargetCounters* counters);
};

}  // namespace sluice::model
