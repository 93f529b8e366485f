// An independent reader of GGUF files for the export tests (header, key/values with their types,
// tensor infos and offsets, alignment), ggml's MXFP4 row dequantisation written from its
// definition, sluice's own MXFP4 product as the reference it must equal, and the checks every
// export test shares (layout, keys, shapes, bytes copied or widened, one-line refusals).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "export/export_gguf.h"
#include "format/safetensors.h"
#include "device/cpu/kernels.h"
#include "model_test_util.h"

namespace sluice::gguf_test {

namespace fs = std::filesystem;
using testing::TempDir;

struct Kv {
  uint32_t type = 0, elem = 0;
  uint64_t u = 0;  // unsigned scalars, bool
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
};
struct TensorRec {
  std::vector<int64_t> ne;
  int32_t type = -1;
  uint64_t offset = 0;
};
struct Gguf {
  std::string bytes;
  uint32_t version = 0;
  std::map<std::string, Kv> kv;
  std::vector<std::string> order;
  std::map<std::string, TensorRec> tensors;
  uint64_t data_start = 0;
  const uint8_t* data(const std::string& name) const {
    return reinterpret_cast<const uint8_t*>(bytes.data() + data_start + tensors.at(name).offset);
  }
};

struct Cursor {
  const std::string& b;
  size_t at = 0;
  template <typename T>
  T get() {
    if (at + sizeof(T) > b.size()) throw std::runtime_error("GGUF truncated");
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    if (at + n > b.size()) throw std::runtime_error("GGUF string truncated");
    std::string s = b.substr(at, n);
    at += n;
    return s;
  }
};

inline uint64_t type_bytes(int32_t type, int64_t n) {
  switch (type) {
    case 0: return uint64_t(n) * 4;
    case 30: return uint64_t(n) * 2;
    case 39: return uint64_t(n) / 32 * 17;
  }
  throw std::runtime_error("unexpected ggml type " + std::to_string(type));
}

inline Gguf read_gguf(const std::string& path) {
  Gguf g;
  std::ifstream in(path, std::ios::binary);
  g.bytes.assign(std::istreambuf_iterator<char>(in), {});
  Cursor c{g.bytes};
  if (c.get<uint32_t>() != 0x46554747u) throw std::runtime_error("bad magic");
  g.version = c.get<uint32_t>();
  const int64_t nt = c.get<int64_t>(), nkv = c.get<int64_t>();
  auto scalar = [&](uint32_t t, Kv& kv) {
    switch (t) {
      case 4: kv.u = c.get<uint32_t>(); break;
      case 5: kv.ints.push_back(c.get<int32_t>()); break;
      case 6: kv.f = c.get<float>(); break;
      case 7:  // bool: a scalar in u, array elements in ints
        kv.u = c.get<uint8_t>();
        if (kv.type == 9) kv.ints.push_back(int64_t(kv.u));
        break;
      case 8: kv.strs.push_back(c.str()); break;
      default: throw std::runtime_error("unexpected value type " + std::to_string(t));
    }
  };
  for (int64_t i = 0; i < nkv; ++i) {
    std::string key = c.str();
    Kv kv;
    kv.type = c.get<uint32_t>();
    if (kv.type == 9) {
      kv.elem = c.get<uint32_t>();
      const uint64_t n = c.get<uint64_t>();
      for (uint64_t k = 0; k < n; ++k) scalar(kv.elem, kv);
    } else {
      scalar(kv.type, kv);
      if (kv.type == 8) kv.s = kv.strs[0], kv.strs.clear();
    }
    if (g.kv.count(key)) throw std::runtime_error("duplicate key " + key);
    g.kv[key] = kv;
  }
  for (int64_t i = 0; i < nt; ++i) {
    std::string name = c.str();
    TensorRec t;
    const uint32_t nd = c.get<uint32_t>();
    for (uint32_t d = 0; d < nd; ++d) t.ne.push_back(c.get<int64_t>());
    t.type = c.get<int32_t>();
    t.offset = c.get<uint64_t>();
    if (g.tensors.count(name)) throw std::runtime_error("duplicate tensor " + name);
    g.tensors[name] = t;
    g.order.push_back(name);
  }
  g.data_start = (c.at + 31) / 32 * 32;
  return g;
}

inline int64_t numel(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// Header, alignment and offsets: data starts 32-aligned, tensors follow each other in info order,
// each padded to 32, and the file ends with the last one.
inline void check_layout(const Gguf& g) {
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.data_start % 32, 0u);
  uint64_t expect = 0;
  for (const std::string& name : g.order) {
    const TensorRec& t = g.tensors.at(name);
    EXPECT_EQ(t.offset, expect) << name;
    EXPECT_EQ(t.ne[0] % (t.type == 39 ? 32 : 1), 0) << name;
    EXPECT_LT(name.size(), 64u);
    expect += (type_bytes(t.type, numel(t.ne)) + 31) / 32 * 32;
  }
  EXPECT_EQ(g.bytes.size(), g.data_start + expect);
}

inline void expect_key(const Gguf& g, const std::string& key, uint32_t type) {
  ASSERT_TRUE(g.kv.count(key)) << key;
  EXPECT_EQ(g.kv.at(key).type, type) << key;
}

inline void expect_tensor(const Gguf& g, const std::string& name, std::vector<int64_t> ne, int32_t type) {
  ASSERT_TRUE(g.tensors.count(name)) << name;
  EXPECT_EQ(g.tensors.at(name).ne, ne) << name;
  EXPECT_EQ(g.tensors.at(name).type, type) << name;
}

inline void expect_same_bytes(const Gguf& g, const std::string& name, const format::TensorSet& ts, const std::string& src) {
  const format::TensorInfo& t = ts.get(src);
  ASSERT_TRUE(g.tensors.count(name)) << name;
  ASSERT_EQ(type_bytes(g.tensors.at(name).type, numel(g.tensors.at(name).ne)), t.nbytes) << name;
  EXPECT_EQ(std::memcmp(g.data(name), t.data, t.nbytes), 0) << name << " differs from " << src;
}

// F32 GGUF values equal to the checkpoint's values widened (BF16 or F32 source).
inline void expect_widened(const Gguf& g, const std::string& name, const format::TensorSet& ts, const std::string& src) {
  const format::TensorInfo& t = ts.get(src);
  ASSERT_EQ(g.tensors.at(name).type, 0) << name;
  ASSERT_EQ(numel(g.tensors.at(name).ne), t.numel()) << name;
  const float* got = reinterpret_cast<const float*>(g.data(name));
  for (int64_t i = 0; i < t.numel(); ++i) {
    float want = t.dtype == DType::F32 ? reinterpret_cast<const float*>(t.data)[i]
                                       : bf16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i]);
    ASSERT_EQ(got[i], want) << name << "[" << i << "]";
  }
}

// ggml's dequantize_row_mxfp4: element j = low nibble of qs[j], j + 16 = high nibble.
inline std::vector<float> ggml_mxfp4_row(const uint8_t* blocks, int64_t cols) {
  static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  std::vector<float> out(static_cast<size_t>(cols));
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* blk = blocks + b * 17;
    const float d = std::ldexp(1.0f, int(blk[0]) - 128);  // GGML_E8M0_TO_FP32_HALF
    for (int j = 0; j < 16; ++j) {
      out[size_t(b * 32 + j)] = float(kv[blk[1 + j] & 0x0F]) * d;
      out[size_t(b * 32 + j + 16)] = float(kv[blk[1 + j] >> 4]) * d;
    }
  }
  return out;
}

// A [rows, cols] MXFP4 matrix as sluice's own scalar MXFP4 product reads it: W * e_c for every column c.
inline std::vector<float> sluice_mxfp4_matrix(const void* packed, const void* scales, int64_t rows, int64_t cols) {
  device::Weight w{.type = device::WeightType::MXFP4, .rows = rows, .cols = cols, .data = packed, .scales = scales};
  std::vector<float> eye(size_t(cols * cols), 0.0f), y(size_t(cols * rows));
  for (int64_t c = 0; c < cols; ++c) eye[size_t(c * cols + c)] = 1.0f;
  device::linear_on(device::scalar_isa(), w, eye.data(), cols, y.data());
  std::vector<float> m(size_t(rows * cols));  // row-major [rows, cols]
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) m[size_t(r * cols + c)] = y[size_t(c * rows + r)];
  return m;
}
inline std::vector<float> sluice_mxfp4_matrix(const format::TensorInfo& packed, const format::TensorInfo& scales,
                                              int64_t rows, int64_t cols) {
  return sluice_mxfp4_matrix(packed.data, scales.data, rows, cols);
}

// A GGUF F32 tensor's element i.
inline float f32_at(const Gguf& g, const std::string& name, int64_t i) {
  float v;
  std::memcpy(&v, g.data(name) + i * 4, 4);
  return v;
}

inline std::string export_to(const std::string& model_dir, const TempDir& tmp, const std::string& name) {
  const std::string out = tmp / name;
  gguf::export_gguf(model_dir, out);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  return out;
}

inline void expect_refused(const std::string& dir, const TempDir& tmp, const std::string& what) {
  const std::string out = tmp / "x.gguf";
  try {
    gguf::export_gguf(dir, out);
    ADD_FAILURE() << "exported " << dir;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

}  // namespace sluice::gguf_test
