// Random tiny checkpoints: the tensor list is the model's own roster, so what is written is
// exactly what the loader expects; values are drawn per tensor kind so every path matters
// (non-unit norms, non-zero AttnRes projections, per-head A_log with zero padding, valid E8M0).
#include "model/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "format/dspark_config.h"
#include "format/qwen3_config.h"
#include "format/safetensors.h"
#include "model/arch/dspark.h"
#include "model/arch/kimi.h"
#include "model/arch/qwen3.h"
#include "model/registry.h"

namespace sluice::model {
namespace {

using nlohmann::json;

// splitmix64: a small portable generator, so checkpoints are identical on every platform. Its k-th
// output depends only on the seed and k (the state advances by a constant), so any stretch of the
// stream can be drawn on its own: at(seed, k) is the generator whose next() is output k.
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
struct Rng {
  uint64_t s;
  static Rng at(uint64_t seed, uint64_t k) { return Rng{seed + k * kGolden}; }
  uint64_t next() {
    uint64_t z = (s += kGolden);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

json layer_list(const std::vector<int64_t>& v) { return json(v); }

void put(std::byte* out, DType dt, int64_t i, double v) {
  if (dt == DType::F32) {
    float f = float(v);
    std::memcpy(out + 4 * i, &f, 4);
  } else {
    uint16_t b = f32_to_bf16(float(v));
    std::memcpy(out + 2 * i, &b, 2);
  }
}

int64_t numel(const TensorSpec& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

// Stream draws per element of each kind (a normal takes two uniforms), in element order.
int64_t draws_per_element(Init init) {
  switch (init) {
    case Init::Normal: case Init::NormWeight: case Init::ResProj: case Init::DtBias: case Init::Conv:
    case Init::Bias: case Init::Sink: case Init::CorrectionBias:
      return 2;
    case Init::BlockScale: case Init::ALog: case Init::Packed: case Init::GroupScale: case Init::Scale:
      return 1;
    case Init::MatrixShape:
      return 0;
  }
  return 0;
}

// The draws a whole tensor takes (ALog draws only for its leading init_arg entries).
uint64_t tensor_draws(const TensorSpec& t) {
  const int64_t n = numel(t);
  return uint64_t(t.init == Init::ALog ? std::min(n, t.init_arg) : n * draws_per_element(t.init));
}

// Elements [i0, i1) of tensor t, whose draws start at output `first` of the seed's stream, into
// out (element i0 first): the values a sequential pass over the whole stream gives them.
void fill_values(const TensorSpec& t, uint64_t seed, uint64_t first, int64_t i0, int64_t i1, std::byte* out) {
  Rng rng = Rng::at(seed, first + uint64_t(i0 * draws_per_element(t.init)));
  const int64_t cols = t.shape.back();
  out -= i0 * int64_t(dtype_size(t.dtype));  // index out by element number
  switch (t.init) {
    case Init::Normal: {
      if (t.dtype == DType::F8_E4M3) {
        // e4m3 codes of N(0, 16²); the block scales (BlockScale) bring the product to ~1/sqrt(cols).
        for (int64_t i = i0; i < i1; ++i) out[i] = std::byte(f32_to_e4m3(float(16.0 * rng.normal())));
        break;
      }
      bool embedding = t.name.find("embed_tokens") != std::string::npos;
      double sd = embedding ? 1.0 : 1.0 / std::sqrt(double(cols));
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, sd * rng.normal());
      break;
    }
    case Init::BlockScale:
      for (int64_t i = i0; i < i1; ++i)
        put(out, t.dtype, i, (0.75 + 0.5 * rng.uniform()) / (16.0 * std::sqrt(double(t.init_arg))));
      break;
    case Init::NormWeight:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, 1.0 + 0.1 * rng.normal());
      break;
    case Init::ResProj:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, rng.normal() / std::sqrt(double(cols)));
      break;
    case Init::ALog:
      // One value per head, zeros after (a per-channel misreading would use the zeros).
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, i < t.init_arg ? std::log(1.0 + 15.0 * rng.uniform()) : 0.0);
      break;
    case Init::DtBias:
    case Init::Conv:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, 0.5 * rng.normal());
      break;
    case Init::Bias:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, 0.1 * rng.normal());
      break;
    case Init::Sink:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, rng.normal());
      break;
    case Init::CorrectionBias:
      for (int64_t i = i0; i < i1; ++i) put(out, t.dtype, i, 0.05 * rng.normal());
      break;
    case Init::Packed:
      for (int64_t i = i0; i < i1; ++i) out[i] = std::byte(rng.next() & 0xff);
      break;
    case Init::GroupScale:
      // Uniform int4 codes have E[q²] = 21.5: these scales give weights of about 1/sqrt(cols).
      for (int64_t i = i0; i < i1; ++i)
        put(out, t.dtype, i, (0.75 + 0.5 * rng.uniform()) / (std::sqrt(21.5) * std::sqrt(double(t.init_arg))));
      break;
    case Init::MatrixShape: {
      const int32_t shape[2] = {int32_t(t.init_rows), int32_t(t.init_arg)};
      for (int64_t i = i0; i < i1; ++i) std::memcpy(out + 4 * i, &shape[i], 4);
      break;
    }
    case Init::Scale:
      for (int64_t i = i0; i < i1; ++i) out[i] = std::byte(121 + rng.next() % 4);
      break;
  }
}

// Elements [i0, i1) as fill_values gives them, split over the thread pool in pieces of at least
// 64 Ki elements (each piece starts the stream at its own first element).
void fill_values_parallel(const TensorSpec& t, uint64_t seed, uint64_t first, int64_t i0, int64_t i1, std::byte* out) {
  const int64_t esize = int64_t(dtype_size(t.dtype));
  ThreadPool::global().parallel_for(i1 - i0, int64_t(1) << 16, [&](int64_t a, int64_t b) {
    fill_values(t, seed, first, i0 + a, i0 + b, out + a * esize);
  });
}

// The whole tensor from rng's position, advancing rng past its draws.
std::vector<std::byte> fill(const TensorSpec& t, Rng& rng) {
  const int64_t n = numel(t);
  std::vector<std::byte> out(size_t(n * dtype_size(t.dtype)));
  fill_values_parallel(t, rng.s, 0, 0, n, out.data());
  rng.s += tensor_draws(t) * kGolden;
  return out;
}

}  // namespace

std::string tiny_config_json(const TinySpec& s) {
  std::vector<int64_t> kda_layers;
  for (int64_t l = 1; l <= s.layers; ++l)
    if (std::find(s.mla_layers.begin(), s.mla_layers.end(), l) == s.mla_layers.end()) kda_layers.push_back(l);
  const int64_t bos = s.vocab - 4, eos = s.vocab - 3, pad = s.vocab - 1;
  json j;
  if (s.arch == format::KimiArch::KimiK3) {
    json tc = {
        {"model_type", "kimi_linear"},
        {"dtype", "bfloat16"},
        {"vocab_size", s.vocab},
        {"hidden_size", s.hidden},
        {"num_hidden_layers", s.layers},
        {"max_position_embeddings", 1048576},
        {"rms_norm_eps", 1e-5},
        {"hidden_act", "situ"},
        {"activation_situ_beta", 4.0},
        {"activation_situ_linear_beta", 25.0},
        {"intermediate_size", s.dense_inter},
        {"first_k_dense_replace", s.dense_layers},
        {"moe_layer_freq", 1},
        {"num_experts", s.experts},
        {"num_experts_per_token", s.top_k},
        {"num_shared_experts", s.shared},
        {"moe_intermediate_size", s.moe_inter},
        {"routed_expert_hidden_size", s.latent},
        {"latent_moe_use_norm", true},
        {"moe_router_activation_func", "sigmoid"},
        {"topk_method", "noaux_tc"},
        {"moe_renormalize", true},
        {"routed_scaling_factor", s.routed_scaling},
        {"use_grouped_topk", true},
        {"num_expert_group", s.expert_groups},
        {"topk_group", s.topk_groups},
        {"num_attention_heads", s.heads},
        {"num_key_value_heads", s.heads},
        {"q_lora_rank", s.q_lora},
        {"kv_lora_rank", s.kv_lora},
        {"qk_nope_head_dim", s.nope},
        {"qk_rope_head_dim", s.rope},
        {"v_head_dim", s.v_dim},
        {"mla_use_nope", true},
        {"mla_use_output_gate", true},
        {"attn_res_block_size", s.block},
        {"num_nextn_predict_layers", 0},
        {"use_cache", true},
        {"tie_word_embeddings", false},
        {"bos_token_id", bos},
        {"eos_token_id", eos},
        {"pad_token_id", pad},
        {"linear_attn_config",
         {{"num_heads", s.kda_heads},
          {"head_dim", s.kda_head_dim},
          {"short_conv_kernel_size", s.conv_kernel},
          {"use_full_rank_gate", true},
          {"gate_lower_bound", -5.0},
          {"kda_layers", layer_list(kda_layers)},
          {"full_attn_layers", layer_list(s.mla_layers)}}},
        {"quantization_config",
         {{"format", "mxfp4-pack-quantized"},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"format", "mxfp4-pack-quantized"},
              {"targets", json::array({"Linear"})},
              {"weights",
               {{"group_size", 32},
                {"num_bits", 4},
                {"dynamic", false},
                {"symmetric", true},
                {"observer", "minmax"},
                {"scale_dtype", "torch.uint8"},
                {"strategy", "group"},
                {"type", "float"}}}}}}}}}};
    j = {{"model_type", "kimi_k3"},   {"architectures", json::array({"KimiK3ForConditionalGeneration"})},
         {"dtype", "bfloat16"},       {"tie_word_embeddings", false},
         {"bos_token_id", bos},       {"eos_token_id", eos},
         {"pad_token_id", pad},       {"text_config", tc}};
  } else {
    std::vector<std::string> layer_types, mlp_types;
    for (int64_t l = 1; l <= s.layers; ++l) {
      bool mla = std::find(s.mla_layers.begin(), s.mla_layers.end(), l) != s.mla_layers.end();
      layer_types.push_back(mla ? "full_attention" : "linear_attention");
      mlp_types.push_back(l <= s.dense_layers ? "dense" : "sparse");
    }
    j = {{"model_type", "kimi_linear"},
         {"architectures", json::array({"KimiLinearForCausalLM"})},
         {"dtype", "bfloat16"},
         {"vocab_size", s.vocab},
         {"hidden_size", s.hidden},
         {"num_hidden_layers", s.layers},
         {"rms_norm_eps", 1e-5},
         {"hidden_act", "silu"},
         {"intermediate_size", s.dense_inter},
         {"moe_intermediate_size", s.moe_inter},
         {"num_experts", s.experts},
         {"num_experts_per_token", s.top_k},
         {"num_shared_experts", s.shared},
         {"moe_renormalize", true},
         {"routed_scaling_factor", s.routed_scaling},
         {"num_expert_group", s.expert_groups},
         {"topk_group", s.topk_groups},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.heads},
         {"q_lora_rank", s.q_lora > 0 ? json(s.q_lora) : json(nullptr)},
         {"kv_lora_rank", s.kv_lora},
         {"qk_nope_head_dim", s.nope},
         {"qk_rope_head_dim", s.rope},
         {"v_head_dim", s.v_dim},
         {"linear_num_heads", s.kda_heads},
         {"linear_head_dim", s.kda_head_dim},
         {"linear_conv_kernel_dim", s.conv_kernel},
         {"layer_types", layer_types},
         {"mlp_layer_types", mlp_types},
         {"tie_word_embeddings", false},
         {"bos_token_id", bos},
         {"eos_token_id", eos},
         {"pad_token_id", pad}};
  }
  return j.dump(2) + "\n";
}

namespace {

// Writes the roster's tensors (drawn in roster order from one stream seeded with `seed`, then cut
// into `shards` files by bytes), the index for several shards, generation_config.json and, last,
// config.json: a directory with a config is a complete checkpoint. Tensors are made while the files
// are written, a chunk at a time on every core (the stream is drawn at each tensor's own position),
// so a checkpoint of many GB needs neither its size in memory nor one core's time.
void write_roster(const std::vector<TensorSpec>& roster, uint64_t seed, int shards, const std::string& config_text,
                  const json& generation, const std::string& dir, void (*progress)(int64_t done, int64_t total)) {
  if (shards < 1) fail("make-tiny: --shards must be at least 1");
  std::filesystem::create_directories(dir);
  int64_t total = 0;
  std::vector<uint64_t> first_draw;  // each tensor's first output of the stream
  uint64_t draws = 0;
  for (const auto& t : roster) {
    total += numel(t) * int64_t(dtype_size(t.dtype));
    first_draw.push_back(draws);
    draws += tensor_draws(t);
  }
  std::vector<std::vector<size_t>> shard_members(static_cast<size_t>(shards));
  json weight_map = json::object();
  auto shard_name = [&](int i) {
    return shards == 1 ? std::string("model.safetensors")
                       : cat("model-", std::string(5 - std::to_string(i + 1).size(), '0'), i + 1, "-of-",
                             std::string(5 - std::to_string(shards).size(), '0'), shards, ".safetensors");
  };
  int64_t done = 0;
  for (size_t k = 0; k < roster.size(); ++k) {
    const TensorSpec& t = roster[k];
    int shard = int(std::min<int64_t>(shards - 1, done * shards / std::max<int64_t>(total, 1)));
    done += numel(t) * int64_t(dtype_size(t.dtype));
    shard_members[size_t(shard)].push_back(k);
    weight_map[t.name] = shard_name(shard);
  }
  int64_t written = 0;
  if (progress) progress(0, total);
  for (int i = 0; i < shards; ++i) {
    const std::vector<size_t>& members = shard_members[size_t(i)];
    std::vector<format::TensorShape> shapes;
    for (size_t k : members) shapes.push_back({roster[k].name, roster[k].dtype, roster[k].shape});
    format::write_safetensors_streamed(
        dir + "/" + shard_name(i), shapes, {{"format", "pt"}},
        [&](size_t m, uint64_t offset, std::span<std::byte> out) {
          const TensorSpec& t = roster[members[m]];
          const int64_t esize = int64_t(dtype_size(t.dtype));
          const int64_t i0 = int64_t(offset) / esize, i1 = i0 + int64_t(out.size()) / esize;
          fill_values_parallel(t, seed, first_draw[members[m]], i0, i1, out.data());
          written += int64_t(out.size());
          if (progress) progress(written, total);
        });
  }
  if (shards > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_durably(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
  }
  write_file_durably(dir + "/generation_config.json", generation.dump(2) + "\n");
  write_file_durably(dir + "/config.json", config_text);
}

}  // namespace

void write_tiny_checkpoint(const TinySpec& spec, const std::string& dir,
                           void (*progress)(int64_t done, int64_t total)) {
  std::string config_text = tiny_config_json(spec);
  format::KimiConfig c = format::parse_kimi_config(config_text, "make-tiny config");
  std::vector<TensorSpec> roster = kimi_tensors(c, nullptr).expanded(kimi_expert_bank(c));
  json gen = {{"bos_token_id", c.bos_token_id}, {"eos_token_id", c.eos_token_id}};
  write_roster(roster, spec.seed, spec.shards, config_text, gen, dir, progress);
}

std::string tiny_moe_config_json(const TinyMoeSpec& s) {
  const int64_t bos = s.vocab - 3, eos = s.vocab - 2, pad = s.vocab - 1;
  json j;
  if (s.arch == "qwen3_moe") {
    std::vector<int64_t> dense_only;
    for (int64_t l = 0; l < s.dense_layers; ++l) dense_only.push_back(l);
    j = {{"model_type", "qwen3_moe"},
         {"architectures", json::array({"Qwen3MoeForCausalLM"})},
         {"vocab_size", s.vocab},
         {"hidden_size", s.hidden},
         {"intermediate_size", s.dense_inter},
         {"moe_intermediate_size", s.moe_inter},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.kv_heads},
         {"head_dim", s.head_dim},
         {"num_experts", s.experts},
         {"num_experts_per_tok", s.top_k},
         {"norm_topk_prob", s.norm_topk},
         {"decoder_sparse_step", s.sparse_step},
         {"mlp_only_layers", dense_only},
         {"rope_theta", s.rope_theta},
         {"max_position_embeddings", 4096}};
  } else if (s.arch == "gpt_oss") {
    std::vector<std::string> types;
    for (int64_t l = 0; l < s.layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    j = {{"model_type", "gpt_oss"},
         {"architectures", json::array({"GptOssForCausalLM"})},
         {"vocab_size", s.vocab},
         {"hidden_size", s.hidden},
         {"intermediate_size", s.moe_inter},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.kv_heads},
         {"head_dim", s.head_dim},
         {"num_local_experts", s.experts},
         {"num_experts_per_tok", s.top_k},
         {"experts_per_token", s.top_k},
         {"sliding_window", s.window},
         {"layer_types", types},
         {"attention_bias", true},
         {"swiglu_limit", 7.0},
         {"rms_norm_eps", 1e-5},
         {"rope_theta", s.rope_theta},
         {"rope_scaling",
          {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false},
           {"original_max_position_embeddings", 4096}}},
         {"max_position_embeddings", 131072},
         {"quantization_config",
          {{"modules_to_not_convert",
            json::array({"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"})},
           {"quant_method", "mxfp4"}}}};
  } else if (s.arch == "deepseek_v3" || s.arch == "kimi_k2") {
    j = {{"model_type", s.arch},
         {"architectures", json::array({"DeepseekV3ForCausalLM"})},
         {"vocab_size", s.vocab},
         {"hidden_size", s.hidden},
         {"intermediate_size", s.dense_inter},
         {"moe_intermediate_size", s.moe_inter},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.heads},
         {"q_lora_rank", s.q_lora > 0 ? json(s.q_lora) : json(nullptr)},
         {"kv_lora_rank", s.kv_lora},
         {"qk_nope_head_dim", s.nope},
         {"qk_rope_head_dim", s.rope},
         {"v_head_dim", s.v_dim},
         {"first_k_dense_replace", s.dense_layers},
         {"moe_layer_freq", 1},
         {"n_routed_experts", s.experts},
         {"num_experts_per_tok", s.top_k},
         {"n_shared_experts", s.shared},
         {"n_group", s.expert_groups},
         {"topk_group", s.topk_groups},
         {"norm_topk_prob", s.norm_topk},
         {"routed_scaling_factor", s.routed_scaling},
         {"topk_method", "noaux_tc"},
         {"scoring_func", "sigmoid"},
         {"rms_norm_eps", 1e-6},
         {"rope_theta", s.rope_theta},
         {"rope_scaling",
          {{"type", "yarn"}, {"factor", 40.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 1.0},
           {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 4096}}},
         {"max_position_embeddings", 163840},
         {"num_nextn_predict_layers", 0}};
    if (s.fp8)
      j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                  {"weight_block_size", json::array({128, 128})}};
    if (s.int4)  // Kimi-K2-Thinking's quantization_config
      j["quantization_config"] = {
          {"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"targets", json::array({"Linear"})},
              {"input_activations", nullptr},
              {"output_activations", nullptr},
              {"weights",
               {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"}, {"group_size", 32},
                {"dynamic", false}, {"actorder", nullptr}, {"block_structure", nullptr}, {"observer", "minmax"},
                {"observer_kwargs", json::object()}}}}}}},
          {"ignore", json::array({"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                  "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"})},
          {"kv_cache_scheme", nullptr}};
  } else {
    fail("make-tiny: unknown architecture '", s.arch, "' (qwen3_moe, gpt_oss, deepseek_v3 or kimi_k2)");
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = false;
  j["dtype"] = "bfloat16";
  j["bos_token_id"] = bos;
  j["eos_token_id"] = eos;
  j["pad_token_id"] = pad;
  return j.dump(2) + "\n";
}

void write_tiny_moe_checkpoint(const TinyMoeSpec& spec, const std::string& dir,
                               void (*progress)(int64_t done, int64_t total)) {
  const std::string config_text = tiny_moe_config_json(spec);
  const std::string where = "make-tiny " + spec.arch + " config";
  const Architecture& arch = find_architecture(model_type_of(config_text, where), where);
  const json gen = {{"bos_token_id", spec.vocab - 3}, {"eos_token_id", spec.vocab - 2}};
  write_roster(arch.roster(config_text, where), spec.seed, spec.shards, config_text, gen, dir, progress);
}

std::string tiny_qwen3_config_json(const TinyQwen3Spec& s) {
  json j = {{"model_type", "qwen3"},
            {"architectures", json::array({"Qwen3ForCausalLM"})},
            {"dtype", "bfloat16"},
            {"vocab_size", s.vocab},
            {"hidden_size", s.hidden},
            {"intermediate_size", s.intermediate},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"num_key_value_heads", s.kv_heads},
            {"head_dim", s.head_dim},
            {"hidden_act", "silu"},
            {"max_position_embeddings", 4096},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", s.rope_theta},
            {"rope_scaling", nullptr},
            {"attention_bias", false},
            {"use_sliding_window", false},
            {"tie_word_embeddings", s.tied},
            {"bos_token_id", s.bos >= 0 ? s.bos : s.vocab - 2},
            {"eos_token_id", s.eos >= 0 ? s.eos : s.vocab - 1}};
  return j.dump(2) + "\n";
}

void write_tiny_qwen3_checkpoint(const TinyQwen3Spec& s, const std::string& dir) {
  const std::string config_text = tiny_qwen3_config_json(s);
  const format::Qwen3Config c = format::parse_qwen3_config(config_text, "tiny qwen3 config");
  Rng rng{s.seed};
  std::vector<format::TensorToWrite> tensors;
  const TensorList list = qwen3_tensors(c, nullptr);
  for (const TensorSpec& t : list.specs()) tensors.push_back({t.name, t.dtype, t.shape, fill(t, rng)});
  std::filesystem::create_directories(dir);
  format::write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  // config.json last: a directory with a config is a complete checkpoint.
  write_file_durably(dir + "/config.json", config_text);
}

std::string tiny_dspark_config_json(const TinyDSparkSpec& s, const format::KimiConfig& t) {
  std::vector<int64_t> ids = s.target_layer_ids;
  if (ids.empty()) {
    // Spread like K3's [2, 23, 47, 71, 89] of 93: the middle of n equal slices of the target.
    const int64_t n = std::min<int64_t>(3, t.num_layers);
    for (int64_t i = 0; i < n; ++i) ids.push_back((2 * i + 1) * t.num_layers / (2 * n));
  }
  // K3's mask token is 163837 = V - 3; tiny targets use V - 3 as EOS, so take the unused V - 2.
  const int64_t mask = t.vocab_size - 2;
  json j = {{"architectures", json::array({"K3DSparkModel"})},
            {"model_type", "kimi_k3_dspark"},
            {"dtype", "bfloat16"},
            {"hidden_size", t.hidden_size},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"num_key_value_heads", s.heads},
            {"q_lora_rank", s.q_lora},
            {"kv_lora_rank", s.kv_lora},
            {"qk_nope_head_dim", s.nope},
            {"qk_rope_head_dim", s.rope},
            {"v_head_dim", s.v_dim},
            {"intermediate_size", s.inter},
            {"hidden_act", "silu"},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 50000.0},
            {"rope_scaling",
             {{"type", "yarn"},
              {"factor", 32.0},
              {"original_max_position_embeddings", 32768},
              {"beta_fast", 32.0},
              {"beta_slow", 1.0},
              {"mscale", 1.0},
              {"mscale_all_dim", 1.0}}},
            {"max_position_embeddings", 1048576},
            {"vocab_size", t.vocab_size},
            {"markov_rank", s.markov_rank},
            {"markov_head_type", "vanilla"},
            {"mask_token_id", mask},
            {"target_layer_ids", ids},
            {"num_draft_tokens", s.draft_tokens},
            {"tie_word_embeddings", false}};
  return j.dump(2) + "\n";
}

void write_tiny_dspark(const TinyDSparkSpec& spec, const format::KimiConfig& target, const std::string& dir) {
  const std::string config_text = tiny_dspark_config_json(spec, target);
  format::DSparkConfig c = format::parse_dspark_config(config_text, "make-tiny DSpark config");
  for (int64_t id : c.target_layer_ids)
    if (id >= target.num_layers) fail("make-tiny: DSpark target layer ", id, " is outside the target's ", target.num_layers, " layers");
  std::filesystem::create_directories(dir);
  Rng rng{spec.seed};
  std::vector<format::TensorToWrite> tensors;
  const TensorList list = dspark_tensors(c, nullptr);
  for (const TensorSpec& t : list.specs()) tensors.push_back({t.name, t.dtype, t.shape, fill(t, rng)});
  format::write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  // config.json last: a directory with a config is a complete checkpoint.
  write_file_durably(dir + "/config.json", config_text);
}

}  // namespace sluice::model
