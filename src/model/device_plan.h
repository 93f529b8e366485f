// The memory plan of a model on a device with memory of its own (a GPU), checked before any weight
// is copied: a model whose resident part cannot fit is refused at once with the numbers, instead of
// after minutes of copying by the allocation that finally fails.
#pragma once
#include <cstddef>
#include <string>

#include "device/device.h"

namespace sluice::model {

// What the model keeps on the device: its spine (every non-expert weight and parameter) and the
// routed experts when they are resident.
struct DevicePlan {
  size_t spine_bytes = 0;
  size_t expert_bytes = 0;
};

// Working memory allowed for beyond the weights: states, caches and a pass's scratch of the small
// contexts a first run uses (larger ones are refused by the allocation with its own numbers).
inline constexpr size_t kDeviceWorkingBytes = size_t(1) << 30;

// The refusal for `plan` on a device named `device` with memory `m`: empty when it fits (or the
// device has no memory of its own), else the one-line reason with the numbers and what to do.
std::string device_plan_refusal(const std::string& device, const device::Device::MemoryInfo& m, const DevicePlan& plan);

// Throws a one-line error naming the model directory, the device, the plan and the free memory
// when the plan plus kDeviceWorkingBytes exceeds what the device has free. No-op on the CPU.
void check_device_plan(const device::Device& d, const std::string& dir, const DevicePlan& plan);

}  // namespace sluice::model
