// Checkpoint weights as GGUF tensors, for every architecture's mapping: a matrix in its own format
// (F32, BF16, MXFP4 repacked into ggml's blocks) or widened exactly to F32; FP8 and INT4 matrices,
// which this llama.cpp has no type for, only widened (value x block scale as one fp32 product, as
// DeepSeek's reference dequantization makes it; bf16(q·s)); small parameters as F32; MLA's kv_b
// split into k_b and v_b; one layer's routed experts stacked from the expert bank, with gpt-oss's
// interleaved gate/up rows taken apart. ggml shapes are the PyTorch shapes reversed (ne[0] is the
// contiguous, input dimension). Bytes are produced while the file is written, from the mapped
// checkpoint, so every view handed in must outlive Writer::write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "export/gguf_writer.h"
#include "format/safetensors.h"
#include "device/weight.h"
#include "model/blocks/mla.h"
#include "model/blocks/mlp.h"
#include "store/expert_bank.h"

namespace sluice::gguf {

// Row r of `m` as cols fp32 values: F32 and BF16 exactly, MXFP4 as E2M1 x 2^e (exact), FP8 as value
// x its block's scale (one fp32 product), INT4_G32 as bf16(q·s) widened.
void weight_row_f32(const device::Weight& m, int64_t r, float* out);

class TensorEmitter {
 public:
  // `arch` names llama.cpp's architecture in refusals; `widen`: every tensor F32 (--f32).
  TensorEmitter(Writer& w, std::string arch, bool widen) : w_(w), arch_(std::move(arch)), widen_(widen) {}

  // The ggml type a matrix of m's format is written as: its own (MXFP4 repacked), F32 when
  // widening. Throws naming `name` for FP8 and INT4 without widening (no GGUF type in llama.cpp).
  TensorType type_of(const device::Weight& m, const std::string& name) const;

  // A [rows, cols] matrix: ne {cols, rows}.
  void matrix(const std::string& name, const device::Weight& m);
  // The same, always F32 (llama.cpp reads the router as F32).
  void matrix_f32(const std::string& name, const device::Weight& m);
  // m's bias [rows] as F32; zeros when m has none (an exact stand-in where llama.cpp requires one).
  void bias(const std::string& name, const device::Weight& m);
  // F32 values already in memory (norms and other parameters, derived vectors).
  void f32(const std::string& name, std::vector<int64_t> ne, std::vector<float> values);
  // MLA's kv_b [heads·(nope+v_dim), rank] split per head as llama.cpp's converters do: blk +
  // "attn_k_b.weight" (numpy [heads, rank, nope], the nope rows transposed) and "attn_v_b.weight"
  // ([heads, v_dim, rank]).
  void kv_b(const std::string& blk, const device::Weight& m, int64_t heads, int64_t nope, int64_t v_dim);
  // An MLA layer's projections up to the attention, as deepseek2 and kimi's MLA layers name them:
  // attn_q_a, attn_q_a_norm and attn_q_b (attn_q without a q LoRA), attn_kv_a_mqa, attn_kv_a_norm,
  // and kv_b split as above (the output gate and attn_output are the caller's).
  void mla_projections(const std::string& blk, const model::MlaWeights& m, int64_t q_lora_rank, int64_t kv_lora_rank,
                       int64_t heads, int64_t nope, int64_t v_dim);
  // A SwiGLU MLP: blk + ffn_gate / ffn_up / ffn_down + suffix + ".weight" ("" for a dense layer,
  // "_shexp" for shared experts), in that order.
  void swiglu(const std::string& blk, const model::MlpWeights& m, const std::string& suffix = "");

  // One layer's routed experts, stacked: ne {cols, rows, experts}, expert e's rows first, first +
  // step, ... of views[e]'s `slot` matrix (step 2 takes gpt-oss's interleaved gate or up rows apart).
  void experts(const std::string& name, const std::vector<device::ExpertView>& views, store::ExpertSlot slot,
               int64_t first = 0, int64_t step = 1);
  // Their biases: ne {rows, experts}, F32, the same rows.
  void expert_biases(const std::string& name, const std::vector<device::ExpertView>& views, store::ExpertSlot slot,
                     int64_t first = 0, int64_t step = 1);

  bool widen() const { return widen_; }

 private:
  Writer& w_;
  std::string arch_;
  bool widen_;
};

// Every routed expert of `layer` as views on the mapped checkpoint, checked as the loader checks
// them (tensor names, dtypes, shapes, valid scales); throws naming the tensor.
std::vector<device::ExpertView> layer_experts(const store::ExpertBank& bank, const format::TensorSet& ts, int layer);

}  // namespace sluice::gguf
