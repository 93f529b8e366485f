// The CPU backend's registry entry: "cpu" (the active ISA: the best this CPU has, or --isa /
// SLUICE_ISA's) and "cpu:<isa>" for each kernel set this CPU can run; and the process-wide CPU
// device.
#include <string>
#include <thread>

#include "core/error.h"
#include "device/backends.h"
#include "device/cpu/cpu_device.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

std::unique_ptr<Device> open_cpu(std::string_view spec) {
  if (spec == "cpu") return std::make_unique<CpuDevice>(nullptr);
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
  cpu.spellings = "cpu (the best ISA, or --isa / SLUICE_ISA), cpu:scalar, cpu:avx2, cpu:avx512";
  for (const Isa* isa : available_isas()) cpu.variants.push_back(isa->name);
  cpu.chosen = active_isa().name;
  cpu.found.push_back(cat(std::thread::hardware_concurrency(), " threads"));
  return cpu;
}

}  // namespace

const Backend kCpuBackend{{"cpu"}, open_cpu, cpu_devices, describe_cpu};

Device& cpu_device() {
  static CpuDevice dev(nullptr);
  return dev;
}

}  // namespace sluice::device
