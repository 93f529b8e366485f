// The tensor list: binding a checkpoint against it (with the dtype, shape and name checks that make
// load errors name the tensor), keeping it on a device, expanding the expert placeholders.
#include "model/tensor_list.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace sluice::model {
namespace {

using format::TensorInfo;

std::vector<float> to_floats(const format::TensorSet& ts, const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::F32: {
        float f;
        std::memcpy(&f, t.data + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = f16_to_f32(h);
        break;
      }
      default:
        fail(ts.dir(), ": tensor ", t.name, " has dtype ", dtype_name(t.dtype), ", expected F32, BF16 or F16");
    }
  }
  return out;
}

// How make-tiny fills an expert segment: E2M1 codes, int4 codes and E8M0 scales as bytes, FP8 block
// and INT4 group scales as positive numbers sized for the matrix (init_arg: its columns), biases
// small, a weight_shape as the matrix's shape.
TensorSpec segment_spec(const store::ExpertBank& bank, const store::ExpertSegment& s, std::string name,
                        std::vector<int64_t> shape) {
  TensorSpec t{.name = std::move(name), .dtype = s.dtype, .shape = std::move(shape), .init = Init::Normal};
  switch (s.role) {
    case store::SegmentRole::Scales:
      t.init = s.dtype == DType::F32 ? Init::BlockScale : s.dtype == DType::BF16 ? Init::GroupScale : Init::Scale;
      t.init_arg = bank.layout.matrix(s.slot).cols;
      break;
    case store::SegmentRole::Bias: t.init = Init::Bias; break;
    case store::SegmentRole::Data:
      t.init = s.dtype == DType::U8 || s.dtype == DType::I32 ? Init::Packed : Init::Normal;
      break;
    case store::SegmentRole::Shape:
      t.init = Init::MatrixShape;
      t.init_rows = bank.layout.matrix(s.slot).rows;
      t.init_arg = bank.layout.matrix(s.slot).cols;
      break;
  }
  return t;
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorSpec& TensorList::matrix(std::string name, int64_t rows, int64_t cols, device::Weight* dst, DType dt) {
  if (dt == DType::F8_E4M3) {
    // The block scales come first in the list so that the matrix stays its last entry (callers
    // set aliases on the returned spec); weight_matrix() binds them with the values.
    const int64_t B = device::kFp8Block;
    specs_.push_back(TensorSpec{.name = fp8_scale_name(name), .dtype = DType::F32,
                                .shape = {(rows + B - 1) / B, (cols + B - 1) / B}, .init = Init::BlockScale,
                                .init_arg = cols});
  }
  specs_.push_back(TensorSpec{.name = std::move(name), .dtype = dt, .shape = {rows, cols}, .init = Init::Normal,
                              .matrix = dst});
  return specs_.back();
}

std::string fp8_scale_name(const std::string& weight_name) { return weight_name + "_scale_inv"; }

TensorSpec& TensorList::param(std::string name, std::vector<int64_t> shape, Param* dst, Init init, DType dt) {
  specs_.push_back(TensorSpec{.name = std::move(name), .dtype = dt, .shape = std::move(shape), .init = init,
                              .param = dst});
  return specs_.back();
}

TensorSpec& TensorList::bias(std::string name, int64_t rows, device::Weight* of, DType dt) {
  specs_.push_back(TensorSpec{.name = std::move(name), .dtype = dt, .shape = {rows}, .init = Init::Bias, .bias_of = of});
  return specs_.back();
}

void TensorList::experts(int layer) { specs_.push_back(TensorSpec{.experts_of_layer = layer}); }

void TensorList::bind(const format::TensorSet& ts) const {
  for (const TensorSpec& s : specs_) {
    if (s.experts_of_layer >= 0) continue;
    std::string name = s.name;
    if (!ts.find(name))
      for (const std::string& a : s.aliases)
        if (ts.find(a)) name = a;
    if (s.matrix) {
      *s.matrix = weight_matrix(ts, name, s.shape[0], s.shape[1]);
    } else if (s.bias_of) {
      const TensorInfo& t = ts.get(name);
      if (t.shape != s.shape)
        fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), ", config implies ", shape_str(s.shape));
      if (t.dtype != DType::BF16 && t.dtype != DType::F32)
        fail(ts.dir(), ": tensor ", name, " has dtype ", dtype_name(t.dtype), ", expected BF16 or F32 (a bias)");
      s.bias_of->bias = t.data;
      s.bias_of->bias_type = t.dtype;
    } else if (s.param) {
      s.param->host = float_vector(ts, name, s.numel());
    } else {
      const TensorInfo& t = ts.get(name);
      if (t.shape != s.shape)
        fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), ", config implies ", shape_str(s.shape));
    }
  }
}

void TensorList::keep(device::Device& d) const {
  for (const TensorSpec& s : specs_) {
    if (s.matrix && !s.matrix->empty()) *s.matrix = d.keep(*s.matrix);
    if (s.param) s.param->v = s.param->empty() ? device::Vec{} : d.keep(std::span<const float>(s.param->host));
  }
}

size_t TensorList::bytes() const {
  size_t n = 0;
  for (const TensorSpec& s : specs_) {
    if (s.matrix) n += device::weight_bytes(*s.matrix);
    if (s.param) n += s.param->host.size() * sizeof(float);
  }
  return n;
}

std::vector<TensorSpec> TensorList::expanded(const store::ExpertBank& bank) const {
  std::vector<TensorSpec> out;
  for (const TensorSpec& s : specs_) {
    if (s.experts_of_layer < 0) {
      out.push_back(s);
      out.back().matrix = nullptr;
      out.back().param = nullptr;
      out.back().bias_of = nullptr;
      continue;
    }
    const int layer = s.experts_of_layer;
    const auto& segs = bank.layout.segments;
    bool fused = false;
    for (const auto& seg : segs) fused = fused || store::ExpertBank::fused(seg);
    if (fused) {
      for (const auto& seg : segs) out.push_back(segment_spec(bank, seg, bank.tensor_name(seg, layer, 0), bank.tensor_shape(seg)));
      continue;
    }
    for (int e = 0; e < int(bank.num_experts); ++e)
      for (const auto& seg : segs) out.push_back(segment_spec(bank, seg, bank.tensor_name(seg, layer, e), seg.shape));
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

device::Weight weight_matrix(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = ts.get(name);
  if (t.shape != std::vector<int64_t>{rows, cols})
    fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), ", config implies [", rows, ", ", cols, "]");
  device::Weight w;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  if (t.dtype == DType::BF16) {
    w.type = device::WeightType::BF16;
  } else if (t.dtype == DType::F32) {
    w.type = device::WeightType::F32;
  } else if (t.dtype == DType::F8_E4M3) {
    w.type = device::WeightType::FP8_E4M3;
    w.scales = fp8_block_scales(ts, name, rows, cols);
    w.fp8_finite = !device::fp8_has_nan_code(reinterpret_cast<const uint8_t*>(t.data), size_t(rows * cols));
  } else {
    fail(ts.dir(), ": tensor ", name, " has dtype ", dtype_name(t.dtype), ", expected BF16, F32 or F8_E4M3");
  }
  return w;
}

const float* fp8_block_scales(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols) {
  const std::string sname = fp8_scale_name(name);
  if (!ts.find(sname))
    fail(ts.dir(), ": tensor ", name, " is F8_E4M3 but its block scales ", sname, " are missing");
  const TensorInfo& s = ts.get(sname);
  const int64_t B = device::kFp8Block;
  const std::vector<int64_t> grid{(rows + B - 1) / B, (cols + B - 1) / B};
  if (s.dtype != DType::F32)
    fail(ts.dir(), ": tensor ", sname, " has dtype ", dtype_name(s.dtype), ", expected F32 (one scale per ", B, "x", B,
         " block)");
  if (s.shape != grid)
    fail(ts.dir(), ": tensor ", sname, " has shape ", shape_str(s.shape), "; ", name, " [", rows, ", ", cols,
         "] in ", B, "x", B, " blocks needs ", shape_str(grid));
  if (reinterpret_cast<uintptr_t>(s.data) % alignof(float) != 0)
    fail(ts.dir(), ": tensor ", sname, " is not 4-byte aligned in its file");
  const float* p = reinterpret_cast<const float*>(s.data);
  for (int64_t i = 0; i < grid[0] * grid[1]; ++i)
    if (!std::isfinite(p[i]) || !(p[i] > 0))
      fail(ts.dir(), ": tensor ", sname, " block scale ", p[i], " at block ", i, " (FP8 block scales are finite and positive)");
  return p;
}

std::vector<float> float_vector(const format::TensorSet& ts, const std::string& name, int64_t numel) {
  const TensorInfo& t = ts.get(name);
  if (t.numel() != numel)
    fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), " (", t.numel(), " elements), config implies ",
         numel);
  return to_floats(ts, t);
}

void check_token_ids(std::span<const int32_t> tokens, int64_t vocab) {
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      fail("token id ", tokens[t], " at position ", t, " is outside the vocabulary (0..", vocab - 1, ")");
}

}  // namespace sluice::model
