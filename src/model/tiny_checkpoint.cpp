// Random tiny checkpoints: the tensor list is the model's own roster, so what is written is
// exactly what the loader expects; values are drawn per tensor kind so every path matters
// (non-unit norms, non-zero AttnRes projections, per-head A_log with zero padding, valid E8M0).
#include "model/tiny_checkpoint.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/join.h"
#include "core/thread_pool.h"
#include "model/arch/dspark_config.h"
#include "model/arch/qwen3_config.h"
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

// e4m3 codes of N(0, 16²) rounded to the nearest code, drawn from one output of the stream each by
// the inverse of their distribution: the lowest bit is the sign, the top 53 a uniform u, and the
// magnitude code is the first c whose cumulative probability P(|x| < the midpoint of codes c and
// c + 1) exceeds u. A table over u's top 12 bits starts the search a step or two from the answer,
// so a code costs a few comparisons where a Box-Muller normal and its rounding cost two libm calls
// (make-tiny's FP8 checkpoints were written at a third of the BF16 rate).
class E4m3Normal {
 public:
  E4m3Normal() {
    constexpr int kMax = 0x7e;  // the largest finite magnitude code (448)
    for (int c = 0; c < kMax; ++c) {
      const double mid = 0.5 * (double(e4m3_to_f32(uint8_t(c))) + double(e4m3_to_f32(uint8_t(c + 1))));
      cum_[size_t(c)] = std::erf(mid / (16.0 * std::sqrt(2.0)));
    }
    cum_[kMax] = 2.0;  // past every u
    int c = 0;
    for (int j = 0; j < kIndex; ++j) {
      while (cum_[size_t(c)] <= double(j) / kIndex) ++c;
      start_[size_t(j)] = uint8_t(c);
    }
  }
  uint8_t operator()(uint64_t draw) const {
    const double u = double(draw >> 11) * (1.0 / 9007199254740992.0);
    size_t c = start_[size_t(draw >> (64 - kIndexBits))];
    while (cum_[c] <= u) ++c;
    return uint8_t(c | ((draw & 1) << 7));
  }

 private:
  static constexpr int kIndexBits = 12, kIndex = 1 << kIndexBits;
  std::array<double, 127> cum_{};
  std::array<uint8_t, kIndex> start_{};
};

// Stream draws per element of a tensor (a normal takes two uniforms, an e4m3 code one), in element
// order.
int64_t draws_per_element(const TensorSpec& t) {
  if (t.init == Init::Normal && t.dtype == DType::F8_E4M3) return 1;
  switch (t.init) {
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
  return uint64_t(t.init == Init::ALog ? std::min(n, t.init_arg) : n * draws_per_element(t));
}

// Elements [i0, i1) of tensor t, whose draws start at output `first` of the seed's stream, into
// out (element i0 first): the values a sequential pass over the whole stream gives them.
void fill_values(const TensorSpec& t, uint64_t seed, uint64_t first, int64_t i0, int64_t i1, std::byte* out) {
  Rng rng = Rng::at(seed, first + uint64_t(i0 * draws_per_element(t)));
  const int64_t cols = t.shape.back();
  out -= i0 * int64_t(dtype_size(t.dtype));  // index out by element number
  switch (t.init) {
    case Init::Normal: {
      if (t.dtype == DType::F8_E4M3) {
        // e4m3 codes of N(0, 16²); the block scales (BlockScale) bring the product to ~1/sqrt(cols).
        static const E4m3Normal code;
        for (int64_t i = i0; i < i1; ++i) out[i] = std::byte(code(rng.next()));
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

// A registered architecture's checkpoint of a make-tiny config: its roster, generation_config's ids.
void write_tiny(const Architecture& arch, const TinyConfig& t, uint64_t seed, int shards, const std::string& where,
                const std::string& dir, void (*progress)(int64_t done, int64_t total)) {
  const json gen = {{"bos_token_id", t.bos}, {"eos_token_id", t.eos}};
  write_roster(arch.roster(t.config_json, where), seed, shards, t.config_json, gen, dir, progress);
}

}  // namespace

void write_tiny_checkpoint(const TinySpec& spec, const std::string& dir,
                           void (*progress)(int64_t done, int64_t total)) {
  const std::string config_text = tiny_config_json(spec);
  const KimiConfig c = parse_kimi_config(config_text, "make-tiny config");
  write_tiny(kKimiArchitecture, {config_text, c.bos_token_id, c.eos_token_id}, spec.seed, spec.shards,
             "make-tiny config", dir, progress);
}

namespace {

// The registered architecture that makes tiny checkpoints of this model_type.
const Architecture& tiny_architecture(const std::string& model_type) {
  for (const Architecture* a : architectures())
    if (a->tiny)
      for (const std::string& t : a->model_types)
        if (t == model_type) return *a;
  fail("make-tiny: cannot write a '", model_type, "' checkpoint (it writes ", join(tiny_model_types(), ", "), ")");
}

}  // namespace

std::vector<std::string> tiny_model_types() {
  std::vector<std::string> out;
  for (const Architecture* a : architectures())
    if (a->tiny) out.insert(out.end(), a->model_types.begin(), a->model_types.end());
  return out;
}

bool dspark_fits(const std::string& model_type) { return &tiny_architecture(model_type) == &kKimiArchitecture; }

void refuse_quantized_forms(const TinyMoeSpec& spec) {
  if (spec.fp8 || spec.int4) fail("make-tiny: --fp8 and --int4 are not forms of ", spec.arch, " checkpoints");
}

TinyConfig finish_tiny_config(const json& config, const TinyMoeSpec& s) {
  json j = config;
  const int64_t bos = s.vocab - 3, eos = s.vocab - 2, pad = s.vocab - 1;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = false;
  j["dtype"] = "bfloat16";
  j["bos_token_id"] = bos;
  j["eos_token_id"] = eos;
  j["pad_token_id"] = pad;
  return {j.dump(2) + "\n", bos, eos};
}

std::string tiny_moe_config_json(const TinyMoeSpec& spec) { return tiny_architecture(spec.arch).tiny(spec).config_json; }

void write_tiny_moe_checkpoint(const TinyMoeSpec& spec, const std::string& dir,
                               void (*progress)(int64_t done, int64_t total)) {
  const Architecture& arch = tiny_architecture(spec.arch);
  write_tiny(arch, arch.tiny(spec), spec.seed, spec.shards, "make-tiny " + spec.arch + " config", dir, progress);
}

void write_tiny_qwen3_checkpoint(const TinyQwen3Spec& s, const std::string& dir) {
  const std::string config_text = tiny_qwen3_config_json(s);
  const Qwen3Config c = parse_qwen3_config(config_text, "tiny qwen3 config");
  Rng rng{s.seed};
  std::vector<format::TensorToWrite> tensors;
  const TensorList list = qwen3_tensors(c, nullptr);
  for (const TensorSpec& t : list.specs()) tensors.push_back({t.name, t.dtype, t.shape, fill(t, rng)});
  std::filesystem::create_directories(dir);
  format::write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  // config.json last: a directory with a config is a complete checkpoint.
  write_file_durably(dir + "/config.json", config_text);
}

std::string tiny_dspark_config_json(const TinyDSparkSpec& s, const KimiConfig& t) {
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

void write_tiny_dspark(const TinyDSparkSpec& spec, const KimiConfig& target, const std::string& dir) {
  const std::string config_text = tiny_dspark_config_json(spec, target);
  DSparkConfig c = parse_dspark_config(config_text, "make-tiny DSpark config");
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
