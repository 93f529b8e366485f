// Safetensors checkpoints: a validating reader over mmapped files (one file, or the shards
// listed by model.safetensors.index.json) and an atomic writer. Every header field is checked
// at the boundary; errors name the file, the tensor and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace sluice::format {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;
  uint64_t file_offset = 0;  // absolute offset of the data in its file
  std::string file;          // path of the file holding it

  int64_t numel() const;
};

// Parses and validates a safetensors header (the bytes after the 8-byte length prefix).
// `data_size` is the size of the data region that follows. Throws sluice::Error naming `what`
// (usually the file path). Used by the reader and the fuzz target.
std::vector<TensorInfo> parse_safetensors_header(const std::byte* header, size_t header_len, uint64_t data_size,
                                                 const std::string& what,
                                                 std::map<std::string, std::string>* metadata = nullptr);

// One mmapped safetensors file.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: model.safetensors.index.json if present (every listed
// shard must exist and hold exactly the tensors the index assigns to it), else model.safetensors,
// else every *.safetensors file in the directory (a tensor name may appear only once).
class TensorSet {
 public:
  static TensorSet open_dir(const std::string& dir);

  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  const TensorInfo& get(const std::string& name) const;   // throws naming the tensor and directory
  const std::map<std::string, const TensorInfo*>& all() const { return by_name_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
};

// A tensor to write: its bytes are produced by the caller (already in `dtype`'s layout).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

// Writes one safetensors file atomically (temporary name, fsync, rename). Tensors are laid out
// in the given order; the header is padded with spaces to a multiple of 8 bytes.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The same file with the tensors' bytes made while it is written, never all in memory: `produce(k,
// offset, out)` fills `out` with bytes [offset, offset + out.size()) of tensor k. It is called in
// file order with chunks of at most `chunk_bytes`, each while the previous chunk is being written
// (a second thread writes), so making and writing overlap. A failure in produce removes the
// temporary file like any other.
struct TensorShape {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};
using ProduceBytes = std::function<void(size_t tensor, uint64_t offset, std::span<std::byte> out)>;
void write_safetensors_streamed(const std::string& path, const std::vector<TensorShape>& tensors,
                                const std::map<std::string, std::string>& metadata, const ProduceBytes& produce,
                                size_t chunk_bytes = size_t(64) << 20);

}  // namespace sluice::format
