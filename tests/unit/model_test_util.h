// Helpers for model tests: temporary directories and tiny checkpoints written by make-tiny.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

#include "model/arch/kimi.h"
#include "model/registry.h"
#include "model/tiny_checkpoint.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "store/expert_provider.h"
#include "store/prepare.h"

namespace sluice::testing {

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("sluice-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

inline model::TinySpec tiny_k3_spec() { return model::TinySpec{}; }

// A kimi_linear spec that differs from the K3 default in most dimensions.
inline model::TinySpec tiny_linear_spec() {
  model::TinySpec s;
  s.arch = model::KimiArch::KimiLinear;
  s.hidden = 48;
  s.layers = 5;
  s.mla_layers = {2, 5};
  s.kda_heads = 3;
  s.kda_head_dim = 8;
  s.heads = 3;
  s.q_lora = 0;
  s.kv_lora = 16;
  s.nope = 8;
  s.rope = 4;
  s.v_dim = 8;
  s.dense_inter = 64;
  s.experts = 12;
  s.top_k = 3;
  s.shared = 1;
  s.moe_inter = 24;
  s.expert_groups = 3;
  s.topk_groups = 2;
  s.routed_scaling = 2.0;
  s.shards = 1;
  return s;
}

// A tiny K3 checkpoint with 24 experts per layer in dir/m, its experts packed onto two homes and
// loaded streaming with a handful of cache slots, so that every verify pass streams. `ref` is the
// greedy continuation (max_new tokens) of `prompt` with every expert resident; `with_resident`
// (optional) gets that resident model before the experts are packed.
struct StreamedTiny {
  model::TinySpec spec;
  std::vector<int32_t> ref;
  std::unique_ptr<runtime::Engine> engine;
};

inline model::TinySpec streamed_tiny_spec() {
  model::TinySpec s = tiny_k3_spec();
  s.experts = 24;
  return s;
}

// Packs the experts of the checkpoint in `model_dir` onto two homes under `dir` and loads it
// streaming through a cache of `cache_gb` on `device`.
inline std::unique_ptr<runtime::Engine> streamed_engine(const TempDir& dir, const std::string& model_dir, double cache_gb,
                                                        const std::string& device = "cpu",
                                                        const std::string& gpu_experts_gb = "auto",
                                                        const std::string& cpu_experts = "0") {
  store::PrepareOptions po;
  po.homes = {store::parse_home_spec(dir / "h0"), store::parse_home_spec(dir / "h1")};
  po.measure = false;
  store::prepare_experts(model_dir, model::expert_bank_of(model_dir), po);
  runtime::EngineOptions eo;
  eo.model_dir = model_dir;
  eo.cache_gb = cache_gb;
  eo.device = device;
  eo.gpu_experts_gb = gpu_experts_gb;
  eo.cpu_experts = cpu_experts;
  return runtime::Engine::load(eo);
}

inline StreamedTiny streamed_tiny(const TempDir& dir, std::span<const int32_t> prompt, int64_t max_new,
                                  const std::function<void(const model::KimiModel&)>& with_resident = {}) {
  StreamedTiny t;
  t.spec = streamed_tiny_spec();
  model::write_tiny_checkpoint(t.spec, dir / "m");
  {
    auto m = model::KimiModel::load(dir / "m");
    auto st = m->new_state();
    t.ref = runtime::generate(*m, *st, prompt, {.max_new = max_new, .stop_at_eos = false}).generated;
    if (with_resident) with_resident(*m);
  }
  t.engine = streamed_engine(dir, dir / "m", 12 * 4096 * 3 / 1e9);  // a handful of slots: every verify pass streams
  return t;
}

// A provider that serves another's experts, asks the model for guesses two layers ahead
// (lookahead 2) and records which (layer, distance) guesses it was handed, reading none.
class AskTwoLayersAhead : public store::ExpertProvider {
 public:
  explicit AskTwoLayersAhead(store::ExpertProvider* inner) : inner_(inner) {}
  void begin(int layer, std::span<const int32_t> experts) override { inner_->begin(layer, experts); }
  int next_ready(device::ExpertView* out) override { return inner_->next_ready(out); }
  void release(int layer) override { inner_->release(layer); }
  size_t max_batch() const override { return inner_->max_batch(); }
  void prefetch(int layer, std::span<const int32_t> experts, int distance) override {
    if (!experts.empty()) handed.insert({layer, distance});
  }
  int lookahead() const override { return 2; }
  std::set<std::pair<int, int>> handed;

 private:
  store::ExpertProvider* inner_;
};

// The (layer, distance) guesses a pass should hand over with lookahead 2: every MoE layer from
// the layer before it and from the one before that, where those exist.
inline std::set<std::pair<int, int>> guesses_two_layers_ahead(const std::vector<int>& moe_layers) {
  std::set<std::pair<int, int>> want;
  for (int l : moe_layers)
    for (int d : {1, 2})
      if (l - d >= 0) want.insert({l, d});
  return want;
}

// The logits of every row of `prompt` from one pass of a fresh state.
inline std::vector<float> all_logits(model::Target& m, const std::vector<int32_t>& prompt) {
  auto st = m.new_state();
  std::vector<float> out(prompt.size() * size_t(m.info().vocab_size));
  m.forward(*st, prompt, model::PassOptions{.all_logits = true}, out.data());
  return out;
}

}  // namespace sluice::testing
