// The one face front ends (run, serve, bench) see of the engine: Engine::load opens a model
// directory on a device (the registered architecture its config names), with the streaming expert
// store when `sluice prepare` made a manifest, a router trace if asked for, its tokenizer and the
// drafter; a Session holds one sequence's state and generates, reusing the state when a prompt
// extends what it already consumed. Front ends never assemble that pipeline themselves.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "guide/token_mask.h"
#include "device/device.h"
#include "model/target.h"
#include "runtime/generate.h"
#include "runtime/router_trace.h"
#include "runtime/speculate/drafter.h"
#include "runtime/prefix_cache.h"
#include "runtime/state_cache.h"
#include "store/device_tier.h"
#include "store/hybrid_plan.h"
#include "store/streaming_experts.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

struct EngineOptions {
  std::string model_dir;
  std::string device = "cpu";    // cpu (follows --isa / SLUICE_ISA), cpu:scalar|avx2|avx512, cuda[:N]
  std::string experts = "auto";  // auto (stream if prepared) | stream | resident
  double cache_gb = 1.0;
  // Device memory for routed experts in front of the RAM cache when streaming on a device with
  // memory of its own (store/device_tier.h): "auto" (what is free after the model's resident part,
  // less a reserve for scratch), "0" (off: every expert is copied from RAM for each use) or GB.
  std::string gpu_experts_gb = "auto";
  // The share of each MoE layer's routed experts that a GPU host computes on its cores from RAM
  // in decode passes instead of copying them to the GPU (a plan fixed for the session: DeviceTier):
  // "auto" (from this machine's link and core rates, store/hybrid_plan.h; 0 when every expert
  // fits in the device tier or there is none) or a share in 0..1.
  std::string cpu_experts = "auto";
  // The streaming store's own options (prefetch, its precision gate and depth, the reader) as its
  // flags set them; load() fills in the cache budget (from cache_gb) and the heat file, and a null
  // `source` (where experts a streamed install, `sluice setup --stream`, has no local copy of yet
  // come from) opens the install's own sluice-source.json when there is one. The device tier's
  // copies ahead use the same precision gate.
  store::StreamOptions stream;
  std::string draft = "off";     // off | ngram | model:DIR | dspark:DIR (make_drafter)
  std::string router_trace;      // a path: record every routed-expert request there
  // A directory: save each finished sequence's state there and restore the longest saved prefix of
  // a later prompt (runtime/state_cache.h), within state_cache_gb GB of entries of this model.
  std::string state_cache_dir;
  double state_cache_gb = 8.0;
  // The prefix cache in RAM (runtime/prefix_cache.h): whole states and recurrent parts of recent
  // prompts within prefix_cache_gb GB (0: none). prefix_block: prefill passes also end at every
  // multiple of this many positions so that a part can be kept there (0: parts at pass ends only;
  // -1: 1024 with experts in memory, 0 when they stream, where each pass reads its experts).
  double prefix_cache_gb = 2.0;
  int64_t prefix_block = -1;
};

class Session;

// The --help text of --device.
std::string device_help();

class Engine {
 public:
  static std::unique_ptr<Engine> load(const EngineOptions& opt);
  ~Engine();

  model::Target& model() { return *model_; }
  const model::Target& model() const { return *model_; }
  const model::TargetInfo& info() const { return model_->info(); }
  device::Device& device() { return model_->device(); }
  // The model directory's tokenizer, or null when it has none (ids in, ids out).
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  Drafter* drafter() const { return drafter_.get(); }
  store::StreamingExperts* store() { return store_.get(); }
  const store::DeviceTier* tier() const { return tier_.get(); }
  bool streaming() const { return store_ != nullptr; }
  const EngineOptions& options() const { return opt_; }
  // The state cache on disk, or null without EngineOptions::state_cache_dir.
  StateCache* state_cache() { return state_cache_.get(); }
  // The prefix cache in RAM, or null with EngineOptions::prefix_cache_gb 0.
  PrefixCache* prefix_cache() { return prefix_cache_.get(); }
  // Positions between the prefix cache's parts in a prefill (EngineOptions::prefix_block resolved).
  int64_t prefix_block() const { return prefix_block_; }
  // The tokenizer's vocabulary for guided decoding (runtime/grammar_constraint.h), built at the
  // first call; throws sluice::Error when the model has no tokenizer. Thread-safe.
  std::shared_ptr<const guide::Vocabulary> guide_vocabulary();

  // reuse_state: a generate() whose prompt extends what the session consumed continues from its
  // state (only the new suffix is prefilled), or from the longest prefix of the prompt the state
  // cache holds when that is longer.
  std::unique_ptr<Session> new_session(bool reuse_state = true);

  // Counters for --stats and event logs (model passes, store hits, per-home bandwidth...).
  nlohmann::json stats_json() const;
  // One human-readable block for --stats.
  std::string stats_text(int64_t generated_tokens) const;

 private:
  Engine() = default;
  EngineOptions opt_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<device::Device> own_device_;  // null: the process-wide CPU device
  std::unique_ptr<model::Target> model_;
  std::unique_ptr<store::StreamingExperts> store_;
  std::unique_ptr<store::DeviceTier> tier_;  // after store_: destroyed before it
  bool arena_pinned_ = false;                 // store_'s RAM arena registered with the device
  // The split of experts between the GPU and the host's cores (--cpu-experts): the share planned,
  // the fraction of the bank the tier can hold, and for auto the rates it came from and whence.
  double hybrid_share_ = 0, hybrid_resident_ = 0;
  store::HybridRates hybrid_rates_;
  std::string hybrid_note_;
  std::unique_ptr<RouteRecorder> recorder_;
  std::unique_ptr<Drafter> drafter_;  // after the model: it may hold views of it
  std::unique_ptr<StateCache> state_cache_;
  std::unique_ptr<PrefixCache> prefix_cache_;
  int64_t prefix_block_ = 0;
  std::mutex guide_mutex_;
  std::shared_ptr<const guide::Vocabulary> guide_vocab_;
};

class Session {
 public:
  Session(Engine& engine, bool reuse_state);
  // Runs prompt + continuation; with opt.drafter null the engine's drafter is used. When the prompt
  // strictly extends the tokens this session's state holds, only the new suffix is fed; a target
  // that can cut its state back (KV caches) also keeps the part of the state the prompt shares. The
  // engine's state cache may give a longer prefix; a generation that finishes normally saves its
  // state there.
  // Cancellation: set opt.cancel to an atomic flag the caller owns (one per request) and store true
  // in it from any thread (a signal handler, a connection watcher); within one layer of a pass or
  // before the next chunk or step, generate() returns the tokens generated so far with
  // stop_reason "cancelled", and the session's state is reset (the next call prefills afresh).
  GenerateResult generate(std::span<const int32_t> prompt, GenerateOptions opt,
                          const std::function<void(int32_t)>& on_token = {},
                          const std::function<void(const StepInfo&)>& on_step = {});
  // Prompt tokens the last generate() found in the state already or restored from the prefix or
  // the state cache (their prefill was skipped), and of those how many came from the state cache.
  size_t reused() const { return reused_; }
  size_t restored() const { return restored_; }
  void reset();
  model::State& state() { return *state_; }

 private:
  Engine& engine_;
  std::unique_ptr<model::State> state_;
  bool reuse_;
  std::vector<int32_t> tape_;  // exactly what the state has consumed (empty: unknown)
  size_t tape_prompt_ = 0;     // how much of tape_ was its request's prompt
  size_t reused_ = 0, restored_ = 0;
};

}  // namespace sluice::runtime
