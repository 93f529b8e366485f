// Buf views and the device registry (the backends' table, open_device and the listings): the one
// place outside each backend's folder that names the backends.
#include "device/device.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "device/backends.h"

namespace sluice::device {

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

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> all = {&kCpuBackend, &kCudaBackend};
  return all;
}

std::unique_ptr<Device> open_device(std::string_view spec) {
  for (const Backend* b : backends())
    for (const std::string& p : b->prefixes)
      if (spec == p || (spec.size() > p.size() && spec.substr(0, p.size()) == p && spec[p.size()] == ':'))
        return b->open(spec);
  std::string names;
  for (const Backend* b : backends())
    for (const std::string& p : b->prefixes) names += (names.empty() ? "" : ", ") + p;
  fail("unknown device '", std::string(spec), "' (a device is ", names, ", or one of those with ':' and an ISA or an index; ",
       "`sluice devices` lists them)");
}

std::vector<std::string> available_devices() {
  std::vector<std::string> out;
  for (const Backend* b : backends())
    for (std::string& name : b->devices()) out.push_back(std::move(name));
  return out;
}

std::vector<DeviceBackend> device_backends() {
  std::vector<DeviceBackend> out;
  for (const Backend* b : backends()) out.push_back(b->describe());
  return out;
}

std::string device_help() {
  std::string out = "Where the model computes: ";
  const std::vector<DeviceBackend> backends = device_backends();
  for (size_t i = 0; i < backends.size(); ++i) out += (i ? ", or " : "") + backends[i].spellings;
  return out;
}

}  // namespace sluice::device
