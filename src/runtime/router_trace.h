// Router traces: an ExpertProvider wrapper that records every (layer, experts) request the model
// makes (one line per request: the union of a pass's routes) to a JSON-lines file, for
// `sluice warm` and analysis. Read by fetch::read_router_trace.
#pragma once
#include <cstdio>
#include <string>

#include "store/expert_provider.h"

namespace sluice::runtime {

inline constexpr const char* kRouterTraceFormat = "sluice-router-trace";

class RouteRecorder : public store::ExpertProvider {
 public:
  // First line: {"format", "version": 1, "num_layers", "num_experts"}; then {"layer", "experts"}.
  RouteRecorder(store::ExpertProvider* inner, const std::string& path, int64_t num_layers, int64_t num_experts);
  ~RouteRecorder() override;
  void begin(int layer, std::span<const int32_t> experts) override;
  int next_ready(device::ExpertView* out) override { return inner_->next_ready(out); }
  void release(int layer) override { inner_->release(layer); }
  bool pass_rows(int64_t rows) override { return inner_->pass_rows(rows); }
  void prefetch(int layer, std::span<const int32_t> experts, int distance) override {
    inner_->prefetch(layer, experts, distance);
  }
  int lookahead() const override { return inner_->lookahead(); }
  size_t max_batch() const override { return inner_->max_batch(); }
  uint64_t requests() const { return requests_; }

 private:
  store::ExpertProvider* inner_;
  std::string path_;
  std::FILE* f_ = nullptr;
  uint64_t requests_ = 0;
};

}  // namespace sluice::runtime
