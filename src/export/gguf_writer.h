// A small GGUF (version 3) writer: typed key/values, tensor infos and tensor data, as llama.cpp's
// gguf loader reads them (little-endian; data 32-byte aligned, each tensor padded to 32, data in
// info order). Tensor bytes are produced on demand while the file is written, so a model is never
// held in memory whole; the file is written to PATH.tmp, fsynced and renamed, so a crash never
// leaves a partial file under PATH.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::gguf {

inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT (no general.alignment key)

// GGUF value types (gguf.h).
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};

// ggml tensor types written here (ggml.h): F32, BF16, and MXFP4 (17-byte blocks of 32: one E8M0
// byte, then 16 bytes whose low nibbles are elements 0..15 and high nibbles 16..31).
enum class TensorType : int32_t { F32 = 0, BF16 = 30, MXFP4 = 39 };
// Bytes of a tensor of `numel` elements; throws when numel is not a whole number of blocks.
uint64_t tensor_bytes(TensorType t, int64_t numel);
const char* tensor_type_name(TensorType t);

// Receives a tensor's bytes in any number of pieces.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

class Writer {
 public:
  void add_u32(std::string key, uint32_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_string(std::string key, std::string v);
  void add_i32_array(std::string key, std::vector<int32_t> v);
  void add_bool_array(std::string key, std::vector<bool> v);
  void add_string_array(std::string key, std::vector<std::string> v);

  // `ne` in ggml order (ne[0] contiguous). `produce` must write exactly tensor_bytes() bytes.
  void add_tensor(std::string name, std::vector<int64_t> ne, TensorType type, std::function<void(Sink&)> produce);

  bool has_key(std::string_view key) const;
  size_t tensor_count() const { return tensors_.size(); }
  size_t key_count() const { return kvs_.size(); }
  uint64_t data_bytes() const;  // the data section, padding included
  // Writes the file (PATH.tmp, fsync, rename). `progress(done, total)` after each tensor.
  void write(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress = {}) const;

 private:
  struct Kv {
    std::string key;
    ValueType type;
    ValueType elem = ValueType::U8;  // arrays
    std::string bytes;               // the value as written (after the type, or after elem type + count)
    uint64_t count = 0;              // arrays
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    TensorType type;
    uint64_t bytes;
    std::function<void(Sink&)> produce;
  };
  void add_kv(Kv kv);
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace sluice::gguf
