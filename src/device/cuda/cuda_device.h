// The CUDA device behind the device interface, in three ISAs: `cuda-ref` (one thread per
// independent output, the scalar CPU op's loop order, no fused multiply-add, mathf.h's
// transcendentals: bit-identical to cpu:scalar op by op and for whole models), `cuda` (the weight
// products on the tensor cores, mma_fast.cu, and fixed-tree row reductions) and `cuda-ffma` (the
// same with the products on the CUDA cores, gemv_fast.cu: faster for one row of a BF16 weight
// today, much slower for several rows and for prefill). Both fast ISAs are batch-invariant bit for
// bit and within the sum-order bound of scalar; every other op is shared with cuda-ref. This
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
enum class CudaIsa { Ref, TensorCores, Ffma };
// Opens GPU `index` with one of the ISAs. Throws sluice::Error naming the index when there is no
// such device.
std::unique_ptr<Device> open_cuda_device(int index, CudaIsa isa);

}  // namespace sluice::device
