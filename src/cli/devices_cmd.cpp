// `sluice devices`: what this build and machine can compute on, as --device names: each backend
// (device/device.h) with its kernel sets and the devices it found (the CPU's ISAs, the best of
// which `--device cpu` picks; each GPU with its compute capability and memory).
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "device/device.h"

namespace sluice::cli {

Action register_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices",
                                 "List the devices --device can name: CPU ISAs, and GPUs with compute capability and memory");
  return [cmd]() -> int {
    if (!cmd->parsed()) return -1;
    for (const device::DeviceBackend& b : device::device_backends()) {
      std::string variants;
      for (const std::string& v : b.variants) variants += " " + v;
      std::printf("%-13s %s\n", b.name.c_str(), b.spellings.c_str());
      if (!variants.empty())
        std::printf("%-13s kernel sets:%s (a bare '%s' uses %s)\n", "", variants.c_str(), b.name.c_str(), b.chosen.c_str());
      for (const std::string& f : b.found) std::printf("%-13s %s\n", "", f.c_str());
    }
    return 0;
  };
}

}  // namespace sluice::cli
