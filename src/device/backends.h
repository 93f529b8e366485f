// The registry entries of the backends this build has, each defined in its own folder
// (device/cpu/cpu_backend.cpp, device/cuda/cuda_backend.cpp) and listed once, in device.cpp's
// backends(). A new backend: its folder, its entry here and one line there.
#pragma once
#include "device/device.h"

namespace sluice::device {

extern const Backend kCpuBackend;
extern const Backend kCudaBackend;  // without the CUDA backend in the build: says so when named

}  // namespace sluice::device
