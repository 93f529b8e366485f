// The CUDA device behind the device interface, in two ISAs like the CPU's scalar/SIMD pair:
// `cuda-ref` (one thread per independent output, the scalar CPU op's loop order, no fused
// multiply-add, mathf.h's transcendentals: bit-identical to cpu:scalar op by op and for whole
// models) and `cuda` (fast weight products with a fixed warp reduction per output, batch-invariant
// bit for bit, within the sum-order bound of scalar; every other op shared with cuda-ref). This
// header needs no CUDA header: the sluice binary is the same with or without a GPU, and without
// one cuda_device_count() is 0.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"

namespace sluice::device {

// GPUs the CUDA runtime sees (0 without a driver or a device: never throws).
int cuda_device_count();
// "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)" per device, for `--help` and logs.
std::vector<std::string> cuda_device_descriptions();
// Opens GPU `index` with the reference (cuda-ref) or the fast (cuda) ISA. Throws sluice::Error
// naming the index when there is no such device.
std::unique_ptr<Device> open_cuda_device(int index, bool reference);

}  // namespace sluice::device
