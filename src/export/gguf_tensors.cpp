// Rows of checkpoint weights in the ggml type they are written as: copied (F32, BF16), repacked
// (MXFP4) or widened to fp32 (any format), one row at a time, straight from the mapped file.
#include "export/gguf_tensors.h"

#include <cstring>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "export/export_gguf.h"
#include "store/resident_experts.h"

namespace sluice::gguf {
namespace {

using device::Weight;

// Checkpoint tensors may start at any byte of a mapped file: elements are read by copy.
template <typename T>
T load(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + size_t(i) * sizeof(T), sizeof(T));
  return v;
}
using device::WeightType;

// Rows first, first + step, ... (count of them) of `m`, each as type `t`.
void emit_rows(Sink& s, const Weight& m, TensorType t, int64_t first, int64_t step, int64_t count) {
  const int64_t cols = m.cols;
  std::vector<float> f(t == TensorType::F32 ? size_t(cols) : 0);
  std::vector<uint8_t> blocks(t == TensorType::MXFP4 ? size_t(cols / 32 * 17) : 0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t r = first + i * step;
    switch (t) {
      case TensorType::F32:
        if (m.type == WeightType::F32) {
          s.write(static_cast<const char*>(m.data) + size_t(r * cols) * 4, size_t(cols) * 4);
        } else {
          weight_row_f32(m, r, f.data());
          s.write(f.data(), f.size() * 4);
        }
        break;
      case TensorType::BF16:
        SLUICE_CHECK(m.type == WeightType::BF16, "BF16 rows from a ", device::weight_type_name(m.type), " weight");
        s.write(static_cast<const char*>(m.data) + size_t(r * cols) * 2, size_t(cols) * 2);
        break;
      case TensorType::MXFP4:
        SLUICE_CHECK(m.type == WeightType::MXFP4, "MXFP4 rows from a ", device::weight_type_name(m.type), " weight");
        repack_mxfp4_row(static_cast<const uint8_t*>(m.data) + r * (cols / 2),
                         static_cast<const uint8_t*>(m.scales) + r * (cols / 32), cols, blocks.data());
        s.write(blocks.data(), blocks.size());
        break;
    }
  }
}

const Weight& slot_of(const device::ExpertView& v, store::ExpertSlot slot) {
  switch (slot) {
    case store::ExpertSlot::Gate: return v.gate;
    case store::ExpertSlot::Up: return v.up;
    case store::ExpertSlot::Down: return v.down;
  }
  return v.gate;
}

float bias_at(const Weight& m, int64_t r) {
  return m.bias_type == DType::BF16 ? bf16_to_f32(load<uint16_t>(m.bias, r)) : load<float>(m.bias, r);
}

}  // namespace

void repack_mxfp4_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint8_t* out) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* p = packed + b * 16;  // byte k: element 2k (low nibble), 2k+1 (high nibble)
    auto code = [p](int i) { return uint8_t((p[i / 2] >> (4 * (i & 1))) & 0x0F); };
    uint8_t* o = out + b * 17;
    o[0] = scales[b];
    for (int j = 0; j < 16; ++j) o[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
  }
}

void weight_row_f32(const Weight& m, int64_t r, float* out) {
  const int64_t cols = m.cols;
  switch (m.type) {
    case WeightType::F32:
      std::memcpy(out, static_cast<const char*>(m.data) + size_t(r * cols) * 4, size_t(cols) * 4);
      return;
    case WeightType::BF16:
      for (int64_t k = 0; k < cols; ++k) out[k] = bf16_to_f32(load<uint16_t>(m.data, r * cols + k));
      return;
    case WeightType::MXFP4: {
      const uint8_t* p = static_cast<const uint8_t*>(m.data) + r * (cols / 2);
      const uint8_t* sc = static_cast<const uint8_t*>(m.scales) + r * (cols / 32);
      for (int64_t k = 0; k < cols; ++k)
        out[k] = kE2M1Values[k % 2 ? p[k / 2] >> 4 : p[k / 2] & 15] * e8m0_to_f32(sc[k / 32]);
      return;
    }
    case WeightType::FP8_E4M3: {
      const int64_t B = device::kFp8Block, col_blocks = (cols + B - 1) / B;
      const uint8_t* q = static_cast<const uint8_t*>(m.data) + r * cols;
      for (int64_t k = 0; k < cols; ++k) out[k] = e4m3_to_f32(q[k]) * load<float>(m.scales, (r / B) * col_blocks + k / B);
      return;
    }
    case WeightType::INT4_G32: {
      const int64_t groups = cols / device::kInt4Group;
      float values[16];
      for (int64_t g = 0; g < groups; ++g) {
        device::int4_group_values(load<uint16_t>(m.scales, r * groups + g), values);
        for (int64_t j = 0; j < device::kInt4Group / 8; ++j) {  // eight codes per word, element 8j+i at bits 4i
          const int64_t k = g * device::kInt4Group + j * 8;
          const uint32_t word = load<uint32_t>(m.data, r * (cols / 8) + k / 8);
          for (int i = 0; i < 8; ++i) out[k + i] = values[(word >> (4 * i)) & 15];
        }
      }
      return;
    }
  }
  fail("unknown weight type");
}

TensorType TensorEmitter::type_of(const Weight& m, const std::string& name) const {
  if (widen_) return TensorType::F32;
  switch (m.type) {
    case WeightType::F32: return TensorType::F32;
    case WeightType::BF16: return TensorType::BF16;
    case WeightType::MXFP4: return TensorType::MXFP4;
    case WeightType::FP8_E4M3:
      fail("cannot export ", name, " to GGUF as it is: FP8 e4m3 weights (128x128 block scales) have no GGUF type in "
           "llama.cpp's ", arch_, "; export with --f32 (each value x its block scale, in fp32)");
    case WeightType::INT4_G32:
      fail("cannot export ", name, " to GGUF as it is: INT4 weights (compressed-tensors pack-quantized, group 32) "
           "have no GGUF type in llama.cpp's ", arch_, "; export with --f32 (bf16(q·s) widened)");
  }
  fail("unknown weight type");
}

void TensorEmitter::matrix(const std::string& name, const Weight& m) {
  SLUICE_CHECK(!m.empty(), name, ": no weight bound");
  const TensorType t = type_of(m, name);
  w_.add_tensor(name, {m.cols, m.rows}, t, [m, t](Sink& s) { emit_rows(s, m, t, 0, 1, m.rows); });
}

void TensorEmitter::matrix_f32(const std::string& name, const Weight& m) {
  SLUICE_CHECK(!m.empty(), name, ": no weight bound");
  w_.add_tensor(name, {m.cols, m.rows}, TensorType::F32, [m](Sink& s) { emit_rows(s, m, TensorType::F32, 0, 1, m.rows); });
}

void TensorEmitter::bias(const std::string& name, const Weight& m) {
  std::vector<float> v(size_t(m.rows), 0.0f);
  if (m.bias)
    for (int64_t r = 0; r < m.rows; ++r) v[size_t(r)] = bias_at(m, r);
  f32(name, {m.rows}, std::move(v));
}

void TensorEmitter::f32(const std::string& name, std::vector<int64_t> ne, std::vector<float> values) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  SLUICE_CHECK(int64_t(values.size()) == n, name, ": ", values.size(), " values for ", n, " elements");
  auto v = std::make_shared<std::vector<float>>(std::move(values));
  w_.add_tensor(name, std::move(ne), TensorType::F32, [v](Sink& s) { s.write(v->data(), v->size() * 4); });
}

void TensorEmitter::mla_projections(const std::string& blk, const model::MlaWeights& m, int64_t q_lora_rank,
                                    int64_t kv_lora_rank, int64_t heads, int64_t nope, int64_t v_dim) {
  if (q_lora_rank > 0) {
    matrix(blk + "attn_q_a.weight", m.q_a);
    f32(blk + "attn_q_a_norm.weight", {q_lora_rank}, m.q_a_norm.host);
    matrix(blk + "attn_q_b.weight", m.q_b);
  } else {
    matrix(blk + "attn_q.weight", m.q);
  }
  matrix(blk + "attn_kv_a_mqa.weight", m.kv_a);
  f32(blk + "attn_kv_a_norm.weight", {kv_lora_rank}, m.kv_a_norm.host);
  kv_b(blk, m.kv_b, heads, nope, v_dim);
}

void TensorEmitter::swiglu(const std::string& blk, const model::MlpWeights& m, const std::string& suffix) {
  matrix(blk + "ffn_gate" + suffix + ".weight", m.gate);
  matrix(blk + "ffn_up" + suffix + ".weight", m.up);
  matrix(blk + "ffn_down" + suffix + ".weight", m.down);
}

void TensorEmitter::kv_b(const std::string& blk, const Weight& m, int64_t H, int64_t Dn, int64_t Dv) {
  const int64_t R = m.cols;
  SLUICE_CHECK(m.rows == H * (Dn + Dv), blk, "kv_b: ", m.rows, " rows, heads x (nope + v_dim) is ", H * (Dn + Dv));
  const TensorType t = type_of(m, blk + "attn_kv_b");
  SLUICE_CHECK(t != TensorType::MXFP4, blk, "kv_b: MXFP4 cannot be split into k_b and v_b");
  const size_t es = t == TensorType::F32 ? 4 : 2;
  w_.add_tensor(blk + "attn_k_b.weight", {Dn, R, H}, t, [=](Sink& s) {
    // k_b[h][r][d] = kv_b[h·(Dn+Dv) + d][r]: head h's nope rows, transposed.
    std::vector<char> rows(size_t(Dn * R) * es), out(size_t(Dn) * es);
    std::vector<float> f(t == TensorType::F32 ? size_t(R) : 0);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < Dn; ++d) {
        const int64_t src = h * (Dn + Dv) + d;
        if (t == TensorType::F32) {
          weight_row_f32(m, src, f.data());
          std::memcpy(&rows[size_t(d * R) * es], f.data(), size_t(R) * es);
        } else {
          std::memcpy(&rows[size_t(d * R) * es], static_cast<const char*>(m.data) + size_t(src * R) * es, size_t(R) * es);
        }
      }
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t d = 0; d < Dn; ++d) std::memcpy(&out[size_t(d) * es], &rows[size_t(d * R + r) * es], es);
        s.write(out.data(), out.size());
      }
    }
  });
  w_.add_tensor(blk + "attn_v_b.weight", {R, Dv, H}, t, [=](Sink& s) {
    for (int64_t h = 0; h < H; ++h) emit_rows(s, m, t, h * (Dn + Dv) + Dn, 1, Dv);
  });
}

void TensorEmitter::experts(const std::string& name, const std::vector<device::ExpertView>& views,
                            store::ExpertSlot slot, int64_t first, int64_t step) {
  SLUICE_CHECK(!views.empty(), name, ": no experts");
  const Weight& w0 = slot_of(views[0], slot);
  const int64_t rows = (w0.rows - first + step - 1) / step, cols = w0.cols;
  for (const device::ExpertView& v : views) {
    const Weight& m = slot_of(v, slot);
    SLUICE_CHECK(m.type == w0.type && m.rows == w0.rows && m.cols == w0.cols, name, ": experts differ in format or shape");
  }
  const TensorType t = type_of(w0, name);
  std::vector<Weight> ws;
  for (const device::ExpertView& v : views) ws.push_back(slot_of(v, slot));
  const int64_t X = int64_t(ws.size());
  w_.add_tensor(name, {cols, rows, X}, t, [ws = std::move(ws), t, first, step, rows](Sink& s) {
    for (const Weight& m : ws) emit_rows(s, m, t, first, step, rows);
  });
}

void TensorEmitter::expert_biases(const std::string& name, const std::vector<device::ExpertView>& views,
                                  store::ExpertSlot slot, int64_t first, int64_t step) {
  SLUICE_CHECK(!views.empty(), name, ": no experts");
  const int64_t rows = (slot_of(views[0], slot).rows - first + step - 1) / step;
  std::vector<float> v;
  v.reserve(size_t(rows) * views.size());
  for (const device::ExpertView& e : views) {
    const Weight& m = slot_of(e, slot);
    SLUICE_CHECK(m.bias, name, ": an expert has no bias");
    for (int64_t i = 0; i < rows; ++i) v.push_back(bias_at(m, first + i * step));
  }
  f32(name, {rows, int64_t(views.size())}, std::move(v));
}

std::vector<device::ExpertView> layer_experts(const store::ExpertBank& bank, const format::TensorSet& ts, int layer) {
  std::vector<device::ExpertView> out;
  for (int e = 0; e < int(bank.num_experts); ++e) {
    const std::vector<const std::byte*> seg = store::expert_segments(bank, ts, layer, e);
    bank.layout.validate(seg, cat(ts.dir(), ": expert ", e, " of layer ", layer));
    out.push_back(bank.layout.views(seg));
  }
  return out;
}

}  // namespace sluice::gguf
