// The expert bank: what the store needs to know of a model's routed experts, declared here and
// filled by each architecture (model/arch/*): which layers have them, how many per layer, and
// the byte layout of one expert as one record (its tensors back to back, each a segment, so one
// expert is one contiguous read), with where each segment lies in the checkpoint. Experts stored
// one tensor per expert and experts stored fused per layer (one 3-D tensor, experts along its
// first dimension) are both described. store/, fetch/ and bench/ see this, never a model config.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "device/weight.h"

namespace sluice::store {

// The matrix of an ExpertView a segment belongs to.
enum class ExpertSlot : uint8_t { Gate, Up, Down };
// What a segment holds for its matrix. Shape: the matrix's [rows, cols] as two I32 (compressed-tensors'
// weight_shape), not read by the kernels but checked equal to the matrix by validate().
enum class SegmentRole : uint8_t { Data, Scales, Bias, Shape };

struct ExpertSegment {
  ExpertSlot slot = ExpertSlot::Gate;
  SegmentRole role = SegmentRole::Data;
  // Unique within an expert ("w1.weight_packed"); part of the model identity (store/manifest.h).
  std::string key;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;  // of one expert's tensor
  uint64_t offset = 0;         // within the record (set by ExpertLayout::add)
  uint64_t bytes = 0;          // product of shape times the dtype's size
  // Checkpoint tensor name with "{L}" for the layer and "{E}" for the expert. A name without "{E}"
  // is one tensor per layer holding every expert along its first dimension ([experts, ...shape]).
  std::string tensor;
};

// One matrix of an expert: its format and shape (the views the store hands out).
struct ExpertMatrix {
  ExpertSlot slot = ExpertSlot::Gate;
  device::WeightType type = device::WeightType::BF16;
  int64_t rows = 0, cols = 0;
};

struct ExpertLayout {
  std::vector<ExpertMatrix> matrices;   // gate, up, down (gate and down when gate_up_interleaved)
  // gpt-oss: the Gate matrix holds gate and up rows interleaved ([2·intermediate, input]); there is
  // no Up matrix (device::ExpertView).
  bool gate_up_interleaved = false;
  std::vector<ExpertSegment> segments;  // in record order
  uint64_t record_bytes = 0;            // end of the last segment
  uint64_t slot_bytes = 0;              // record rounded up to kAlign (what a read transfers)

  static constexpr uint64_t kAlign = 4096;

  // Appends a segment at the end of the record (its offset is set here, rounded up to a multiple
  // of its element size so that views of F32 or BF16 segments are aligned; byte and BF16 segments
  // pack back to back as in K3 raw-v1) and updates the sizes. Throws when bytes disagree with
  // shape and dtype, or the key is already taken: the bank is code, but a wrong one would give
  // every later check (dtype, shape, checksum) a wrong reference.
  void add(ExpertSegment s);
  // Throws when the layout has no matrix for `slot`.
  const ExpertMatrix& matrix(ExpertSlot slot) const;

  // Views over a record whose segments start at record + segment.offset.
  device::ExpertView views(const std::byte* record) const;
  // Views over segments that live at separate addresses (one pointer per segment).
  device::ExpertView views(const std::vector<const std::byte*>& segment_data) const;
  // Throws naming `what` for bytes no valid checkpoint holds (MXFP4 E8M0 scale bytes 0 and 255,
  // FP8 block scales that are not finite and positive, INT4 group scales that are not finite, a
  // weight_shape other than the matrix's).
  void validate(const std::vector<const std::byte*>& segment_data, const std::string& what) const;
};

struct ExpertBank {
  int64_t num_layers = 0;       // layers of the model (dense ones included)
  int64_t num_experts = 0;      // routed experts per MoE layer (0: a dense model)
  std::vector<int> moe_layers;  // ascending
  ExpertLayout layout;

  bool empty() const { return num_experts == 0 || moe_layers.empty(); }
  bool is_moe(int layer) const;
  // The checkpoint tensor holding segment s of (layer, expert), and the byte offset of the
  // expert's part inside it (0 unless the tensor is fused per layer).
  std::string tensor_name(const ExpertSegment& s, int layer, int expert) const;
  static bool fused(const ExpertSegment& s);
  uint64_t offset_in_tensor(const ExpertSegment& s, int expert) const;
  // The checkpoint tensor's shape (with the leading [experts] when fused).
  std::vector<int64_t> tensor_shape(const ExpertSegment& s) const;
  // Every distinct checkpoint tensor name of the bank (what an install must fetch or skip).
  std::vector<std::string> tensor_names() const;
  uint64_t total_record_bytes() const { return uint64_t(moe_layers.size()) * uint64_t(num_experts) * layout.record_bytes; }
};

// How code below the model layer learns the bank of a config.json text it reads itself (a remote
// source's, or one it may repair first): the caller passes model::expert_bank_from_config. Throws
// naming `where` for a config it cannot describe.
using ExpertBankFromConfig = std::function<ExpertBank(const std::string& config_text, const std::string& where)>;

}  // namespace sluice::store
