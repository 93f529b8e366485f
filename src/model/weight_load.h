// Views of checkpoint tensors as model weights, shared by every architecture: a [rows, cols]
// matrix checked against the shape its config implies (BF16 or F32, used in place), a small
// vector widened to fp32, and the embedding lookup. Errors name the directory and the tensor.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "kernels/cpu/kernels.h"

namespace sluice::model {

// "[a, b, c]" for messages.
std::string shape_str(const std::vector<int64_t>& shape);

// Tensor `name` of `ts` as a [rows, cols] BF16 or F32 matrix pointing into the mapped file.
kernels::Weight weight_matrix(const format::TensorSet& ts, const std::string& name, int64_t rows, int64_t cols);

// A vector-like tensor (norm weights, biases, conv taps): any float dtype (F32, BF16, F16) and
// exactly `numel` elements, widened to fp32.
std::vector<float> float_vector(const format::TensorSet& ts, const std::string& name, int64_t numel);

// Rows of a [vocab, hidden] BF16 or F32 embedding for `tokens`, widened into h ([T, hidden]).
// An id outside 0..vocab-1 is an error naming it and its position.
void embed_tokens(const kernels::Weight& embedding, std::span<const int32_t> tokens, float* h);

}  // namespace sluice::model
