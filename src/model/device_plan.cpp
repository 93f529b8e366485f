#include "model/device_plan.h"

#include <cstdio>

#include "core/error.h"

namespace sluice::model {

namespace {
std::string gib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  return b;
}
}  // namespace

std::string device_plan_refusal(const std::string& device, const device::Device::MemoryInfo& m, const DevicePlan& plan) {
  if (m.total == 0) return {};
  const size_t need = plan.spine_bytes + plan.expert_bytes + kDeviceWorkingBytes;
  if (need <= m.free) return {};
  const std::string advice = plan.expert_bytes > 0 && plan.spine_bytes + kDeviceWorkingBytes <= m.free
                                 ? "stream the routed experts instead (sluice prepare, then --experts stream)"
                                 : "this model's spine alone does not fit this GPU; use --device cpu";
  return cat("does not fit ", device, ": it needs ", gib(need), " (spine ", gib(plan.spine_bytes),
             plan.expert_bytes ? ", resident experts " + gib(plan.expert_bytes) : std::string(), ", working memory ",
             gib(kDeviceWorkingBytes), ") and ", gib(m.free), " of ", gib(m.total), " is free; ", advice);
}

void check_device_plan(const device::Device& d, const std::string& dir, const DevicePlan& plan) {
  const std::string why = device_plan_refusal(d.name(), d.memory(), plan);
  if (!why.empty()) fail(dir, ": ", why);
}

}  // namespace sluice::model
