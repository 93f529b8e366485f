// `sluice devices`: what this build and machine can compute on, as --device names: the CPU ISAs
// (the best one is what `--device cpu` picks) and each GPU with its compute capability and memory.
#include <cstdio>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "kernels/cpu/kernels.h"
#include "kernels/device.h"
#if defined(SLUICE_HAVE_CUDA)
#include "kernels/cuda/cuda_device.h"
#endif

namespace sluice::cli {

Action register_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices",
                                 "List the devices --device can name: CPU ISAs, and GPUs with compute capability and memory");
  return [cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const unsigned threads = std::thread::hardware_concurrency();
    std::printf("cpu           %u threads; ISAs:", threads);
    for (const kernels::Isa* isa : kernels::available_isas()) std::printf(" %s", isa->name);
    std::printf(" (--device cpu uses %s)\n", kernels::active_isa().name);
#if defined(SLUICE_HAVE_CUDA)
    const auto gpus = kernels::cuda_device_descriptions();
    if (gpus.empty()) std::printf("cuda          none (no NVIDIA GPU or driver visible to this process)\n");
    for (const std::string& g : gpus) std::printf("%s\n", g.c_str());
    if (!gpus.empty())
      std::printf("              each GPU also opens as cuda-ref:N (the scalar CPU order, bit-identical, slow)\n");
#else
    std::printf("cuda          not in this build (configure with -DSLUICE_CUDA=ON where nvcc is installed)\n");
#endif
    return 0;
  };
}

}  // namespace sluice::cli
