// Route recording: forwards to the wrapped provider and appends one JSON line per request.
#include "runtime/router_trace.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace sluice::runtime {

RouteRecorder::RouteRecorder(store::ExpertProvider* inner, const std::string& path, int64_t num_layers,
                             int64_t num_experts)
    : inner_(inner), path_(path) {
  if (!inner_) fail("--router-trace: the model has no expert provider (a model without routed experts?)");
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) fail("--router-trace ", path, ": cannot create: ", std::strerror(errno));
  std::fprintf(f_, "{\"format\":\"%s\",\"version\":1,\"num_layers\":%lld,\"num_experts\":%lld}\n", kRouterTraceFormat,
               (long long)num_layers, (long long)num_experts);
}

RouteRecorder::~RouteRecorder() {
  if (f_) std::fclose(f_);
}

void RouteRecorder::begin(int layer, std::span<const int32_t> experts) {
  std::string line = cat("{\"layer\":", layer, ",\"experts\":[");
  for (size_t i = 0; i < experts.size(); ++i) line += cat(i ? "," : "", experts[i]);
  line += "]}\n";
  if (std::fputs(line.c_str(), f_) < 0) fail("--router-trace ", path_, ": write failed");
  ++requests_;
  inner_->begin(layer, experts);
}

}  // namespace sluice::runtime
