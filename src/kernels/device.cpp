// Buf views, the device registry (open_device, the backends' listings) and the process-wide CPU
// device: the one place outside each backend's folder that knows the backends.
#include "kernels/device.h"

#include <cmath>
#include <string>
#include <thread>

#include "core/error.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/kernels.h"
#if defined(SLUICE_HAVE_CUDA)
#include "kernels/cuda/cuda_device.h"
#endif

namespace sluice::kernels {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::BF16: return "BF16";
    case WeightType::MXFP4: return "MXFP4";
    case WeightType::FP8_E4M3: return "FP8_E4M3";
    case WeightType::INT4_G32: return "INT4_G32";
  }
  return "?";
}

Buf Buf::rows_view(int64_t r0, int64_t n) const {
  SLUICE_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows, "Buf::rows_view(", r0, ", ", n, ") outside ", rows, " rows");
  Buf b = *this;
  b.p = static_cast<char*>(p) + 4 * r0 * ld;
  b.rows = n;
  return b;
}

Buf Buf::cols_view(int64_t c0, int64_t n) const {
  SLUICE_CHECK(c0 >= 0 && n >= 0 && c0 + n <= cols, "Buf::cols_view(", c0, ", ", n, ") outside ", cols, " columns");
  Buf b = *this;
  b.p = static_cast<char*>(p) + 4 * c0;
  b.cols = n;
  return b;
}

Buf Buf::reshaped(int64_t rows2, int64_t cols2) const {
  SLUICE_CHECK(contiguous() && rows2 * cols2 == rows * cols, "Buf::reshaped(", rows2, ", ", cols2, ") of a [", rows,
               ", ", cols, "] buffer", contiguous() ? "" : " with a row stride");
  Buf b = *this;
  b.rows = rows2;
  b.cols = cols2;
  b.ld = cols2;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    dev_ = o.dev_;
    buf_ = o.buf_;
    o.buf_ = {};
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (dev_ && !buf_.empty()) dev_->free(buf_);
  buf_ = {};
}

void rope_table_row(const RopeSpec& spec, int64_t position, float* row) {
  const size_t half = spec.inv_freq.size();
  float* cs = row;
  float* sn = row + half;
  for (size_t i = 0; i < half; ++i) {
    if (spec.f64_angles) {
      const double angle = double(position) * spec.inv_freq[i];
      cs[i] = float(std::cos(angle)) * spec.magnitude;
      sn[i] = float(std::sin(angle)) * spec.magnitude;
    } else {
      const float angle = float(position) * float(spec.inv_freq[i]);
      cs[i] = std::cos(angle) * spec.magnitude;
      sn[i] = std::sin(angle) * spec.magnitude;
    }
  }
}

std::unique_ptr<Device> open_device(std::string_view spec) {
  const std::string s(spec);
  if (s == "cpu") return std::make_unique<CpuDevice>(nullptr);
  if (s.rfind("cpu:", 0) == 0) {
    const std::string want = s.substr(4);
    for (const Isa* isa : available_isas())
      if (want == isa->name) return std::make_unique<CpuDevice>(isa);
    fail("device '", s, "': the ISA '", want, "' is not available on this CPU (choose scalar, avx2 or avx512)");
  }
  for (const char* kind : {"cuda-ref", "cuda"}) {
    const std::string k(kind);
    if (s != k && s.rfind(k + ":", 0) != 0) continue;
    int index = 0;
    if (s.size() > k.size()) {
      const std::string n = s.substr(k.size() + 1);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
        fail("device '", s, "': expected ", k, " or ", k, ":N with N a GPU index");
      index = std::stoi(n);
    }
#if defined(SLUICE_HAVE_CUDA)
    if (cuda_device_count() == 0) fail("device '", s, "': no CUDA device (no GPU or no NVIDIA driver on this machine)");
    return open_cuda_device(index, k == "cuda-ref");
#else
    (void)index;
    fail("device '", s, "': this build of sluice has no CUDA backend (configure with -DSLUICE_CUDA=ON)");
#endif
  }
  fail("unknown device '", s, "' (choose cpu, cpu:scalar, cpu:avx2, cpu:avx512, cuda[:N] or cuda-ref[:N])");
}

Device& cpu_device() {
  static CpuDevice dev(nullptr);
  return dev;
}

std::vector<std::string> available_devices() {
  std::vector<std::string> out;
  for (const Isa* isa : available_isas()) out.push_back(std::string("cpu:") + isa->name);
#if defined(SLUICE_HAVE_CUDA)
  for (int i = 0, n = cuda_device_count(); i < n; ++i) {
    out.push_back("cuda-ref:" + std::to_string(i));
    out.push_back("cuda:" + std::to_string(i));
  }
#endif
  return out;
}

std::vector<DeviceBackend> device_backends() {
  std::vector<DeviceBackend> out;
  DeviceBackend cpu;
  cpu.name = "cpu";
  cpu.spellings = "cpu (the best ISA, or --isa / SLUICE_ISA), cpu:scalar, cpu:avx2, cpu:avx512";
  for (const Isa* isa : available_isas()) cpu.variants.push_back(isa->name);
  cpu.chosen = active_isa().name;
  cpu.found.push_back(cat(std::thread::hardware_concurrency(), " threads"));
  out.push_back(std::move(cpu));
  DeviceBackend gpu;
  gpu.name = "cuda";
  gpu.accelerator = true;
#if defined(SLUICE_HAVE_CUDA)
  gpu.spellings = "cuda[:N], cuda-ref[:N] (the scalar CPU order, bit-identical, slow)";
  gpu.variants = {"cuda", "cuda-ref"};
  gpu.chosen = "cuda";
  gpu.found = cuda_device_descriptions();
  if (gpu.found.empty()) gpu.found.push_back("none (no NVIDIA GPU or driver visible to this process)");
#else
  gpu.spellings = "cuda[:N] when the build has the CUDA backend";
  gpu.found.push_back("not in this build (configure with -DSLUICE_CUDA=ON where nvcc is installed)");
#endif
  out.push_back(std::move(gpu));
  return out;
}

std::string device_help() {
  std::string out = "Where the model computes: ";
  const std::vector<DeviceBackend> backends = device_backends();
  for (size_t i = 0; i < backends.size(); ++i) out += (i ? ", or " : "") + backends[i].spellings;
  return out;
}

}  // namespace sluice::kernels
