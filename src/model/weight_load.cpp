// Checkpoint tensors as weights: shape and dtype checks, widening, embedding lookup.
#include "model/weight_load.h"

#include <cstring>

#include "core/dtype.h"
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

}  // namespace

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

kernels::Weight weight_matrix(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = ts.get(name);
  if (t.shape != std::vector<int64_t>{rows, cols})
    fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), ", config implies [", rows, ", ", cols, "]");
  kernels::Weight w;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  if (t.dtype == DType::BF16) w.type = kernels::WeightType::BF16;
  else if (t.dtype == DType::F32) w.type = kernels::WeightType::F32;
  else fail(ts.dir(), ": tensor ", name, " has dtype ", dtype_name(t.dtype), ", expected BF16 or F32");
  return w;
}

std::vector<float> float_vector(const format::TensorSet& ts, const std::string& name, int64_t numel) {
  const TensorInfo& t = ts.get(name);
  if (t.numel() != numel)
    fail(ts.dir(), ": tensor ", name, " has shape ", shape_str(t.shape), " (", t.numel(), " elements), config implies ",
         numel);
  return to_floats(ts, t);
}

void embed_tokens(const kernels::Weight& E, std::span<const int32_t> tokens, float* h) {
  const int64_t H = E.cols;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= E.rows)
      fail("token id ", id, " at position ", t, " is outside the vocabulary (0..", E.rows - 1, ")");
    float* row = h + static_cast<int64_t>(t) * H;
    if (E.type == kernels::WeightType::BF16) {
      const uint16_t* src = static_cast<const uint16_t*>(E.data) + int64_t(id) * H;
      for (int64_t d = 0; d < H; ++d) row[d] = bf16_to_f32(src[d]);
    } else {
      std::memcpy(row, static_cast<const float*>(E.data) + int64_t(id) * H, static_cast<size_t>(H) * 4);
    }
  }
}

}  // namespace sluice::model
