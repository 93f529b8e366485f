// The CUDA backend's registry entry: "cuda[:N]" (the fast ISA, products on the tensor cores),
// "cuda-ffma[:N]" (products on the CUDA cores) and "cuda-ref[:N]" (bit-identical to cpu:scalar) for
// each GPU the CUDA runtime sees. Compiled in every build (cuda_device.h needs no
// CUDA header); a build without the backend (SLUICE_CUDA=OFF or no nvcc) still answers to the
// names, with an error that says why.
#include <string>

#include "core/error.h"
#include "device/backends.h"
#if defined(SLUICE_HAVE_CUDA)
#include "device/cuda/cuda_device.h"
#endif

namespace sluice::device {
namespace {

std::unique_ptr<Device> open_cuda(std::string_view spec) {
  const std::string s(spec);
  const bool reference = s.rfind("cuda-ref", 0) == 0, ffma = s.rfind("cuda-ffma", 0) == 0;
  const std::string kind = reference ? "cuda-ref" : ffma ? "cuda-ffma" : "cuda";
  int index = 0;
  if (s.size() > kind.size()) {
    const std::string n = s.substr(kind.size() + 1);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
      fail("device '", s, "': expected ", kind, " or ", kind, ":N with N a GPU index");
    index = std::stoi(n);
  }
#if defined(SLUICE_HAVE_CUDA)
  if (cuda_device_count() == 0) fail("device '", s, "': no CUDA device (no GPU or no NVIDIA driver on this machine)");
  return open_cuda_device(index, reference ? CudaIsa::Ref : ffma ? CudaIsa::Ffma : CudaIsa::TensorCores);
#else
  (void)index;
  fail("device '", s, "': this build of sluice has no CUDA backend (configure with -DSLUICE_CUDA=ON)");
#endif
}

std::vector<std::string> cuda_devices() {
  std::vector<std::string> out;
#if defined(SLUICE_HAVE_CUDA)
  for (int i = 0, n = cuda_device_count(); i < n; ++i) {
    out.push_back("cuda-ref:" + std::to_string(i));
    out.push_back("cuda-ffma:" + std::to_string(i));
    out.push_back("cuda:" + std::to_string(i));
  }
#endif
  return out;
}

DeviceBackend describe_cuda() {
  DeviceBackend gpu;
  gpu.name = "cuda";
  gpu.accelerator = true;
#if defined(SLUICE_HAVE_CUDA)
  gpu.spellings =
      "cuda[:N] (products on the tensor cores), cuda-ffma[:N] (on the CUDA cores: faster one-row decode of BF16 "
      "weights, slower prefill and verify passes), cuda-ref[:N] (the scalar CPU order, bit-identical, slow)";
  gpu.variants = {"cuda", "cuda-ffma", "cuda-ref"};
  gpu.chosen = "cuda";
  gpu.found = cuda_device_descriptions();
  if (gpu.found.empty()) gpu.found.push_back("none (no NVIDIA GPU or driver visible to this process)");
#else
  gpu.spellings = "cuda[:N] when the build has the CUDA backend";
  gpu.found.push_back("not in this build (configure with -DSLUICE_CUDA=ON where nvcc is installed)");
#endif
  return gpu;
}

}  // namespace

const Backend kCudaBackend{{"cuda-ref", "cuda-ffma", "cuda"}, open_cuda, cuda_devices, describe_cuda};

}  // namespace sluice::device
