// The Kimi family's tensor roster (every tensor a config implies, with its dtype and shape) and
// the resident weights loaded from a checkpoint against it. make-tiny writes exactly the roster;
// the loader checks a checkpoint against it, so both agree by construction.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/kimi_config.h"
#include "format/safetensors.h"
#include "kernels/cpu/kernels.h"

namespace sluice::model {

using format::KimiConfig;
using kernels::Weight;

// How make-tiny fills a tensor.
enum class Init : uint8_t { Normal, NormWeight, ResProj, ALog, DtBias, Conv, CorrectionBias, Packed, Scale };

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  Init init;
};

std::vector<TensorSpec> kimi_roster(const KimiConfig& c);

struct KdaWeights {
  Weight q, k, v, f_a, f_b, b, g, g_a, g_b, o;      // g (full rank) or g_a/g_b (low rank)
  std::vector<float> q_conv, k_conv, v_conv;         // [P, K]
  std::vector<float> dt_bias, a_log, o_norm;         // [P], [heads], [head_dim]
};

struct MlaWeights {
  Weight q, q_a, q_b, kv_a, kv_b, g, o;  // q (no q_lora) or q_a/q_b; g only with the output gate
  std::vector<float> q_a_norm, kv_a_norm;
};

struct MlpWeights {
  Weight gate, up, down;
};

struct MoeWeights {
  Weight router, latent_down, latent_up;  // latent_* only for K3's latent MoE
  std::vector<float> correction_bias, latent_norm;
  MlpWeights shared;
  bool has_shared = false;
};

struct LayerWeights {
  format::AttnKind attn_kind;
  format::MlpKind mlp_kind;
  std::vector<float> input_norm, post_norm;
  std::vector<float> attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;  // Block AttnRes only
  KdaWeights kda;
  MlaWeights mla;
  MlpWeights dense;
  MoeWeights moe;
};

struct KimiWeights {
  Weight embed, lm_head;
  std::vector<float> final_norm, out_res_norm, out_res_proj;
  std::vector<LayerWeights> layers;
};

// Checks every roster tensor (present, dtype, shape, MXFP4 scale bytes in 1..254) and builds
// views into the mapped checkpoint. Throws naming the directory and tensor.
KimiWeights load_kimi_weights(const KimiConfig& c, const format::TensorSet& ts);

}  // namespace sluice::model
