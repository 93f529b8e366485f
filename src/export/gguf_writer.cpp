// The GGUF writer: the header and key/values are laid out in memory (small), tensor data is
// streamed through a fixed buffer straight to the file.
#include "export/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/durable_file.h"
#include "core/error.h"

namespace sluice::gguf {
namespace {

void put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <typename T>
void put_le(std::string& out, T v) {  // the project only builds on little-endian hosts
  put(out, &v, sizeof v);
}
void put_str(std::string& out, std::string_view s) {
  put_le<uint64_t>(out, s.size());
  out.append(s);
}
uint64_t pad(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Buffered writes to a file descriptor, with the byte count of each tensor checked.
class FileSink final : public Sink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBuf); }
  void write(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    written_ += n;
    while (n > 0) {
      size_t k = std::min(n, kBuf - buf_.size());
      buf_.append(p, k);
      p += k;
      n -= k;
      if (buf_.size() == kBuf) flush();
    }
  }
  void flush() {
    write_all(fd_, buf_.data(), buf_.size(), path_);
    buf_.clear();
  }
  uint64_t written() const { return written_; }

 private:
  static constexpr size_t kBuf = size_t(8) << 20;
  int fd_;
  std::string path_;
  std::string buf_;
  uint64_t written_ = 0;
};

}  // namespace

uint64_t tensor_bytes(TensorType t, int64_t numel) {
  switch (t) {
    case TensorType::F32: return uint64_t(numel) * 4;
    case TensorType::BF16: return uint64_t(numel) * 2;
    case TensorType::MXFP4:
      SLUICE_CHECK(numel % 32 == 0, "MXFP4 tensor of ", numel, " elements is not a whole number of 32-element blocks");
      return uint64_t(numel) / 32 * 17;
  }
  fail("unknown ggml tensor type ", int(t));
}

const char* tensor_type_name(TensorType t) {
  switch (t) {
    case TensorType::F32: return "F32";
    case TensorType::BF16: return "BF16";
    case TensorType::MXFP4: return "MXFP4";
  }
  return "?";
}

void Writer::add_kv(Kv kv) {
  SLUICE_CHECK(!kv.key.empty(), "GGUF key must not be empty");
  for (const Kv& k : kvs_) SLUICE_CHECK(k.key != kv.key, "GGUF key ", kv.key, " written twice");
  kvs_.push_back(std::move(kv));
}

bool Writer::has_key(std::string_view key) const {
  for (const Kv& k : kvs_)
    if (k.key == key) return true;
  return false;
}

void Writer::add_u32(std::string key, uint32_t v) {
  Kv kv{std::move(key), ValueType::U32};
  put_le(kv.bytes, v);
  add_kv(std::move(kv));
}
void Writer::add_f32(std::string key, float v) {
  Kv kv{std::move(key), ValueType::F32};
  put_le(kv.bytes, v);
  add_kv(std::move(kv));
}
void Writer::add_bool(std::string key, bool v) {
  Kv kv{std::move(key), ValueType::BOOL};
  put_le<uint8_t>(kv.bytes, v ? 1 : 0);
  add_kv(std::move(kv));
}
void Writer::add_string(std::string key, std::string v) {
  Kv kv{std::move(key), ValueType::STRING};
  put_str(kv.bytes, v);
  add_kv(std::move(kv));
}
void Writer::add_i32_array(std::string key, std::vector<int32_t> v) {
  Kv kv{std::move(key), ValueType::ARRAY, ValueType::I32};
  for (int32_t x : v) put_le(kv.bytes, x);
  kv.count = v.size();
  add_kv(std::move(kv));
}
void Writer::add_bool_array(std::string key, std::vector<bool> v) {
  Kv kv{std::move(key), ValueType::ARRAY, ValueType::BOOL};
  for (bool x : v) put_le<uint8_t>(kv.bytes, x ? 1 : 0);
  kv.count = v.size();
  add_kv(std::move(kv));
}
void Writer::add_string_array(std::string key, std::vector<std::string> v) {
  Kv kv{std::move(key), ValueType::ARRAY, ValueType::STRING};
  for (const std::string& s : v) put_str(kv.bytes, s);
  kv.count = v.size();
  add_kv(std::move(kv));
}

void Writer::add_tensor(std::string name, std::vector<int64_t> ne, TensorType type, std::function<void(Sink&)> produce) {
  SLUICE_CHECK(!name.empty() && name.size() < 64, "GGUF tensor name '", name, "' must be 1..63 bytes");
  SLUICE_CHECK(!ne.empty() && ne.size() <= 4, "GGUF tensor ", name, " has ", ne.size(), " dimensions (1..4)");
  int64_t n = 1;
  for (int64_t d : ne) {
    SLUICE_CHECK(d > 0, "GGUF tensor ", name, " has a dimension of ", d);
    n *= d;
  }
  if (type == TensorType::MXFP4) SLUICE_CHECK(ne[0] % 32 == 0, "MXFP4 tensor ", name, ": ne[0] = ", ne[0], " is not a multiple of 32");
  for (const Tensor& t : tensors_) SLUICE_CHECK(t.name != name, "GGUF tensor ", name, " written twice");
  tensors_.push_back({std::move(name), std::move(ne), type, tensor_bytes(type, n), std::move(produce)});
}

uint64_t Writer::data_bytes() const {
  uint64_t n = 0;
  for (const Tensor& t : tensors_) n += pad(t.bytes);
  return n;
}

void Writer::write(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) const {
  std::string head;
  put(head, "GGUF", 4);
  put_le<uint32_t>(head, kVersion);
  put_le<int64_t>(head, int64_t(tensors_.size()));
  put_le<int64_t>(head, int64_t(kvs_.size()));
  for (const Kv& kv : kvs_) {
    put_str(head, kv.key);
    put_le<uint32_t>(head, uint32_t(kv.type));
    if (kv.type == ValueType::ARRAY) {
      put_le<uint32_t>(head, uint32_t(kv.elem));
      put_le<uint64_t>(head, kv.count);
    }
    head += kv.bytes;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_str(head, t.name);
    put_le<uint32_t>(head, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put_le<int64_t>(head, d);
    put_le<int32_t>(head, int32_t(t.type));
    put_le<uint64_t>(head, offset);
    offset += pad(t.bytes);
  }
  head.resize(pad(head.size()), '\0');

  PendingFile file(path);
  FileSink sink(file.fd(), file.tmp());
  sink.write(head.data(), head.size());
  const uint64_t total = offset;
  uint64_t done = 0;
  static const char zeros[kAlignment] = {};
  for (const Tensor& t : tensors_) {
    const uint64_t before = sink.written();
    t.produce(sink);
    const uint64_t got = sink.written() - before;
    SLUICE_CHECK(got == t.bytes, "GGUF tensor ", t.name, ": produced ", got, " bytes, its shape and type take ", t.bytes);
    sink.write(zeros, pad(t.bytes) - t.bytes);
    done += pad(t.bytes);
    if (progress) progress(done, total);
  }
  sink.flush();
  file.commit();
}

}  // namespace sluice::gguf
