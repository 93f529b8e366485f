// An engine: a loaded model plus, when the model directory has an expert manifest (made by
// `sluice prepare`), the streaming expert store that serves its routed experts from the homes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/kimi.h"
#include "store/streaming_experts.h"

namespace sluice::runtime {

struct EngineOptions {
  std::string model_dir;
  std::string experts = "auto";  // auto (stream if prepared) | stream | resident
  double cache_gb = 1.0;
  bool prefetch = true;
  std::string reader = "auto";   // auto | io_uring | pread
  bool verify_reads = true;
  int queue_depth = 4;
  // Fetches experts a streamed install has no local copy of yet (made by src/fetch); may be null.
  std::shared_ptr<store::ExpertSource> expert_source;
};

class Engine {
 public:
  static std::unique_ptr<Engine> load(const EngineOptions& opt);
  ~Engine();

  model::KimiModel& model() { return *model_; }
  store::StreamingExperts* store() { return store_.get(); }
  bool streaming() const { return store_ != nullptr; }

  // Counters for --stats and event logs (model passes, store hits, per-home bandwidth...).
  nlohmann::json stats_json() const;
  // One human-readable block for --stats.
  std::string stats_text(int64_t generated_tokens) const;

 private:
  std::unique_ptr<model::KimiModel> model_;
  std::unique_ptr<store::StreamingExperts> store_;
};

}  // namespace sluice::runtime
