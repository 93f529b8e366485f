// The one tensor list of an architecture: every checkpoint tensor a config implies (name, dtype,
// shape, how make-tiny fills it) bound to where the loaded model keeps it. The loader checks a
// checkpoint against the list and binds views, make-tiny writes exactly the list, and the routed
// experts inside it come from the architecture's expert bank, so the three never disagree.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/safetensors.h"
#include "device/device.h"
#include "store/expert_bank.h"

namespace sluice::model {

// How make-tiny fills a tensor.
// BlockScale: FP8 block scales (positive, sized for the matrix's init_arg columns); Scale: MXFP4
// E8M0 bytes; GroupScale: INT4 group scales (positive BF16, sized likewise); MatrixShape: a matrix's
// [init_rows, init_arg] as I32 (compressed-tensors' weight_shape); Packed: random bytes (E2M1 or
// int4 codes); Bias: a linear layer's bias; Sink: gpt-oss's per-head sink logits.
enum class Init : uint8_t {
  Normal, NormWeight, ResProj, ALog, DtBias, Conv, CorrectionBias, Packed, Scale, BlockScale, GroupScale, MatrixShape,
  Bias, Sink
};

// A small fp32 parameter (norm weights, biases, conv taps): widened on the host, kept on the device.
struct Param {
  std::vector<float> host;
  device::Vec v;
  bool empty() const { return host.empty(); }
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::BF16;  // what make-tiny writes
  std::vector<int64_t> shape;
  Init init = Init::Normal;
  int64_t init_arg = 0;       // ALog: how many leading entries are non-zero (one per head)
  int64_t init_rows = 0;      // MatrixShape: the matrix's rows (init_arg: its columns)
  // Where the loader binds it: a [shape[0], shape[1]] matrix (BF16, F32 or FP8, used in place) or a
  // parameter of numel(shape) elements (F32, BF16 or F16, widened). Neither: checked, not bound.
  device::Weight* matrix = nullptr;
  Param* param = nullptr;
  device::Weight* bias_of = nullptr;  // a [rows] BF16 or F32 bias of an earlier-listed matrix
  std::vector<std::string> aliases;  // other names a checkpoint may use for it
  int experts_of_layer = -1;         // >= 0: stands for every routed-expert tensor of that layer
  int64_t numel() const;
};

class TensorList {
 public:
  // A matrix bound as a Weight (BF16, F32, or F8_E4M3 with its block scales, whatever dt says).
  // dt F8_E4M3 (a config whose quantization_config says FP8) also lists the F32 block scales
  // (fp8_scale_name) before it, which the checkpoint must then hold.
  TensorSpec& matrix(std::string name, int64_t rows, int64_t cols, device::Weight* dst, DType dt = DType::BF16);
  TensorSpec& param(std::string name, std::vector<int64_t> shape, Param* dst, Init init, DType dt = DType::BF16);
  // The bias of `of`, a matrix listed before it (bound into its Weight, used in place).
  TensorSpec& bias(std::string name, int64_t rows, device::Weight* of, DType dt = DType::BF16);
  // The routed experts of `layer` (expanded from the expert bank where the tensors are written).
  void experts(int layer);

  const std::vector<TensorSpec>& specs() const { return specs_; }
  // Checks every listed tensor in `ts` (present under its name or an alias, dtype, shape) and binds
  // it. Throws naming the directory and the tensor.
  void bind(const format::TensorSet& ts) const;
  // Makes every bound matrix and parameter usable by the device.
  void keep(device::Device& d) const;
  // The bytes of every bound matrix (values, scales, bias) and parameter: what keep() copies to a
  // device with its own memory.
  size_t bytes() const;
  // The list with the expert placeholders replaced by the bank's tensors (per-expert tensors in
  // expert order, or one fused tensor per segment): exactly what a checkpoint holds, in order.
  std::vector<TensorSpec> expanded(const store::ExpertBank& bank) const;

 private:
  std::vector<TensorSpec> specs_;
};

// "[a, b, c]" for messages.
std::string shape_str(const std::vector<int64_t>& shape);
// The block scales of FP8 weight `name` (DeepSeek-V3: "<module>.weight_scale_inv").
std::string fp8_scale_name(const std::string& weight_name);
// The checked F32 [ceil(rows/128), ceil(cols/128)] block scales of FP8 tensor `name`: present,
// F32, the right grid, finite and positive. Throws naming the tensor.
const float* fp8_block_scales(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols);
// Tensor `name` of `ts` as a [rows, cols] BF16, F32 or FP8 (with its block scales) matrix pointing
// into the mapped file.
device::Weight weight_matrix(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols);
// A vector-like tensor of exactly `numel` elements (F32, BF16 or F16), widened to fp32.
std::vector<float> float_vector(const format::TensorSet& ts, const std::string& name, int64_t numel);
// Throws for an id outside 0..vocab-1, naming it and its position.
void check_token_ids(std::span<const int32_t> tokens, int64_t vocab);

}  // namespace sluice::model
