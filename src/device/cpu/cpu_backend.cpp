// The CPU backend's registry entry: "cpu" (the active ISA: the best this CPU has, or --isa /
// SLUICE_ISA's) and "cpu:<isa>" for each kernel set this CPU can run; and the process-wide CPU
// device.
#include <string>
#include <thread>

#include "core/error.h"
#include "core/parse_number.h"
#include "device/backends.h"
#include "device/cpu/cpu_device.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

// "cpu-emu[:GB[:GB/s]]": the emulated accelerator's memory (default 4 GB) and link rate (default:
// as fast as memcpy).
std::unique_ptr<Device> open_emulated(std::string_view spec) {
  Emulation emu;
  std::string rest(spec.substr(std::string_view("cpu-emu").size()));
  auto number = [&](const char* what) {
    rest.erase(0, 1);  // the ':'
    const size_t end = rest.find(':');
    const std::string text = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end);
    const double v = parse_decimal(text, cat("device '", std::string(spec), "': ", what), 0, 1e6);
    if (!(v > 0)) fail("device '", std::string(spec), "': ", what, " must be positive");
    return v * 1e9;
  };
  if (!rest.empty() && rest[0] == ':') emu.memory_bytes = uint64_t(number("the memory in GB"));
  if (!rest.empty() && rest[0] == ':') emu.link_bytes_per_s = number("the link rate in GB/s");
  if (!rest.empty())
    fail("device '", std::string(spec), "': expected cpu-emu, cpu-emu:GB or cpu-emu:GB:GB/s");
  return std::make_unique<CpuDevice>(nullptr, emu);
}

std::unique_ptr<Device> open_cpu(std::string_view spec) {
  if (spec == "cpu") return std::make_unique<CpuDevice>(nullptr);
  if (spec.substr(0, 7) == "cpu-emu") return open_emulated(spec);
  const std::string want(spec.substr(4));
  for (const Isa* isa : available_isas())
    if (want == isa->name) return std::make_unique<CpuDevice>(isa);
  fail("device '", std::string(spec), "': the ISA '", want, "' is not available on this CPU (choose scalar, avx2 or avx512)");
}

std::vector<std::string> cpu_devices() {
  std::vector<std::string> out;
  for (const Isa* isa : available_isas()) out.push_back(std::string("cpu:") + isa->name);
  return out;
}

DeviceBackend describe_cpu() {
  DeviceBackend cpu;
  cpu.name = "cpu";
  cpu.spellings =
      "cpu (the best ISA, or --isa / SLUICE_ISA), cpu:scalar, cpu:avx2, cpu:avx512; cpu-emu[:GB[:GB/s]] (an "
      "accelerator emulated on the CPU for tests: its own memory, default 4 GB, behind a link, default memcpy's rate)";
  for (const Isa* isa : available_isas()) cpu.variants.push_back(isa->name);
  cpu.chosen = active_isa().name;
  cpu.found.push_back(cat(std::thread::hardware_concurrency(), " threads"));
  return cpu;
}

}  // namespace

const Backend kCpuBackend{{"cpu", "cpu-emu"}, open_cpu, cpu_devices, describe_cpu};

Device& cpu_device() {
  static CpuDevice dev(nullptr);
  return dev;
}

}  // namespace sluice::device
