// Safetensors reader (mmapped, every header field validated) and atomic writer; also the shard
// index of a checkpoint directory and the atomic-file helper shared by other writers.
#include "format/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "format/json_util.h"

namespace sluice::format {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Headers of real checkpoints are at most a few MB (K3: ~5,000 tensors per shard); anything far
// larger is corrupt or hostile, and would otherwise make us parse gigabytes of JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

// A name or value from an untrusted header, quoted and cut short so that messages stay one line.
std::string quote_short(std::string_view text) {
  constexpr size_t kMax = 200;
  if (text.size() <= kMax) return cat('"', text, '"');
  return cat('"', text.substr(0, kMax), "...\" (", text.size(), " bytes)");
}

// Reads a JSON value that must be a non-negative integer fitting in uint64 (offsets, dims).
bool as_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = uint64_t(i);
    return true;
  }
  return false;
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_start, uint64_t data_size,
                       const std::string& what) {
  std::string at = cat(what, ": tensor ", quote_short(name));
  if (!entry.is_object()) fail(at, ": expected an object, got ", describe_json(entry));
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      fail(at, ": unexpected field ", quote_short(it.key()), " (expected dtype, shape, data_offsets)");
  }
  TensorInfo info;
  info.name = name;
  info.file = what;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) fail(at, ": field dtype is missing");
  if (!dtype_it->is_string()) fail(at, ": dtype: expected a string, got ", describe_json(*dtype_it));
  const std::string& dtype_text = dtype_it->get_ref<const std::string&>();
  if (!parse_dtype(dtype_text, &info.dtype)) fail(at, ": unknown dtype ", quote_short(dtype_text));

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) fail(at, ": field shape is missing");
  if (!shape_it->is_array()) fail(at, ": shape: expected an array, got ", describe_json(*shape_it));
  bool has_zero = false;
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const json& d = (*shape_it)[i];
    uint64_t dim = 0;
    if (!as_u64(d, &dim) || dim > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(at, ": shape[", i, "]: expected a non-negative integer, got ", describe_json(d));
    has_zero |= dim == 0;
    info.shape.push_back(int64_t(dim));
  }
  // numel * element size must be representable; a zero dimension makes any product empty.
  uint64_t nbytes = uint64_t(dtype_size(info.dtype));
  if (has_zero) {
    nbytes = 0;
  } else {
    for (int64_t dim : info.shape) {
      if (__builtin_mul_overflow(nbytes, uint64_t(dim), &nbytes))
        fail(at, ": shape ", json(info.shape).dump(), " of ", dtype_text, " overflows 64-bit byte count");
    }
  }

  auto off_it = entry.find("data_offsets");
  if (off_it == entry.end()) fail(at, ": field data_offsets is missing");
  const json& offsets = *off_it;
  uint64_t begin = 0, end = 0;
  if (!offsets.is_array() || offsets.size() != 2 || !as_u64(offsets[0], &begin) || !as_u64(offsets[1], &end))
    fail(at, ": data_offsets: expected [begin, end] of non-negative integers, got ", describe_json(offsets));
  if (begin > end) fail(at, ": data_offsets [", begin, ", ", end, "]: begin is after end");
  if (end > data_size)
    fail(at, ": data_offsets [", begin, ", ", end, "] run past the data region of ", data_size, " bytes");
  if (end - begin != nbytes)
    fail(at, ": data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes but ", dtype_text, " shape ",
         json(info.shape).dump(), " needs ", nbytes);
  info.nbytes = size_t(nbytes);
  info.file_offset = data_start + begin;
  return info;
}

// A shard file name from an index must name a file inside the checkpoint directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != ".." &&
         name.find('\0') == std::string::npos;
}

}  // namespace

int64_t TensorInfo::numel() const {
  // A zero dimension empties the tensor even when the other dimensions' product would overflow
  // (the parser accepts [0, 2^62, 2^62]); otherwise the parser has checked that the product fits.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorInfo> parse_safetensors_header(const std::byte* header, size_t header_len, uint64_t data_size,
                                                 const std::string& what,
                                                 std::map<std::string, std::string>* metadata) {
  if (header_len > kMaxHeaderBytes)
    fail(what, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  json doc = parse_json_text(std::string_view(reinterpret_cast<const char*>(header), header_len),
                             cat(what, " (header JSON, file offset 8)"));
  if (!doc.is_object()) fail(what, ": header: expected a JSON object, got ", describe_json(doc));
  uint64_t data_start = 8 + uint64_t(header_len);
  if (data_size > std::numeric_limits<uint64_t>::max() - data_start)
    fail(what, ": data region of ", data_size, " bytes does not fit in a 64-bit file");

  std::vector<TensorInfo> tensors;
  tensors.reserve(doc.size());
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it->is_object()) fail(what, ": ", kMetadataKey, ": expected an object, got ", describe_json(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          fail(what, ": ", kMetadataKey, ".", quote_short(m.key()), ": expected a string, got ", describe_json(*m));
        if (metadata) (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    if (it.key().empty()) fail(what, ": a tensor has an empty name");
    tensors.push_back(parse_entry(it.key(), *it, data_start, data_size, what));
  }

  // File order; empty tensors occupy no bytes, so only non-empty neighbours can overlap.
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.file_offset != b.file_offset ? a.file_offset < b.file_offset : a.nbytes < b.nbytes;
  });
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.nbytes == 0) continue;
    if (prev && t.file_offset < prev->file_offset + prev->nbytes)
      fail(what, ": tensor ", quote_short(t.name), " (data_offsets [", t.file_offset - data_start, ", ",
           t.file_offset - data_start + t.nbytes, "]) overlaps tensor ", quote_short(prev->name), " (data_offsets [",
           prev->file_offset - data_start, ", ", prev->file_offset - data_start + prev->nbytes, "])");
    if (!prev || t.file_offset + t.nbytes > prev->file_offset + prev->nbytes) prev = &t;
  }
  return tensors;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // Non-blocking open and fstat: a FIFO or device in a shard's place is refused, not waited on.
  std::string why;
  int fd = open_regular(path, O_RDONLY, why);
  if (fd < 0) fail(path, ": cannot open: ", why);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  uint64_t size = uint64_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, ": truncated: ", size, " bytes, too short for the 8-byte header length");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED) fail(path, ": mmap of ", size, " bytes failed: ", std::strerror(err));

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;

  const auto* base = static_cast<const std::byte*>(map);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(uint8_t(base[i])) << (8 * i);
  if (header_len > size - 8)
    fail(path, ": header length ", header_len, " runs past the end of the file (", size,
         " bytes; truncated or not a safetensors file)");
  if (header_len > kMaxHeaderBytes)
    fail(path, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  uint64_t data_size = size - 8 - header_len;
  file->tensors_ = parse_safetensors_header(base + 8, size_t(header_len), data_size, path, &file->metadata_);
  for (TensorInfo& t : file->tensors_) t.data = base + t.file_offset;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

TensorSet TensorSet::open_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, ": not a directory (expected a checkpoint directory)");
  TensorSet set;
  set.dir_ = dir;
  fs::path root(dir);

  auto add_file = [&](const std::string& path) -> SafetensorsFile& {
    set.files_.push_back(std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(path)));
    return *set.files_.back();
  };

  fs::path index_path = root / kIndexName;
  if (fs::exists(index_path, ec)) {
    std::string index_name = index_path.string();
    json index = read_json_file(index_name);
    const json& weight_map = get_object(index, "weight_map", index_name);
    // shard file name -> tensor names the index assigns to it
    std::map<std::string, std::set<std::string>> by_shard;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      std::string at = field_where(field_where(index_name, "weight_map"), it.key());
      if (!it->is_string()) fail(at, ": expected a shard file name, got ", describe_json(*it));
      const std::string& shard = it->get_ref<const std::string&>();
      if (!plain_file_name(shard)) fail(at, ": shard \"", shard, "\" is not a plain file name in ", dir);
      by_shard[shard].insert(it.key());
    }
    if (by_shard.empty()) fail(index_name, ": weight_map lists no tensors");
    // Open every shard first, so that a tensor in the wrong shard is reported with both names.
    for (const auto& [shard, names] : by_shard) {
      std::string shard_path = (root / shard).string();
      if (!fs::exists(shard_path, ec))
        fail(index_name, ": shard \"", shard, "\" (holding tensor ", quote_short(*names.begin()), " and ",
             names.size() - 1, " more) does not exist: ", shard_path);
      SafetensorsFile& file = add_file(shard_path);
      for (const TensorInfo& t : file.tensors()) {
        if (!names.count(t.name)) {
          auto assigned = weight_map.find(t.name);
          if (assigned == weight_map.end())
            fail(shard_path, ": tensor ", quote_short(t.name), " is in this shard but not in the index ", index_name);
          fail(shard_path, ": tensor ", quote_short(t.name), " is in this shard but the index ", index_name,
               " assigns it to shard \"", assigned->get<std::string>(), "\"");
        }
        set.by_name_[t.name] = &t;
      }
    }
    for (const auto& [shard, names] : by_shard) {
      for (const std::string& name : names) {
        if (!set.by_name_.count(name))
          fail(index_name, ": tensor ", quote_short(name), " is assigned to shard ", (root / shard).string(),
               " which does not contain it");
      }
    }
    return set;
  }

  fs::path single = root / kSingleName;
  if (fs::exists(single, ec)) {
    for (const TensorInfo& t : add_file(single.string()).tensors()) set.by_name_[t.name] = &t;
    return set;
  }

  std::vector<std::string> shards;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().extension() == ".safetensors") shards.push_back(entry.path().string());
  }
  if (ec) fail(dir, ": cannot list directory: ", ec.message());
  if (shards.empty())
    fail(dir, ": no ", kIndexName, ", ", kSingleName, " or *.safetensors file in this directory");
  std::sort(shards.begin(), shards.end());
  for (const std::string& shard : shards) {
    for (const TensorInfo& t : add_file(shard).tensors()) {
      auto [it, inserted] = set.by_name_.emplace(t.name, &t);
      if (!inserted) fail(shard, ": tensor ", quote_short(t.name), " is also in ", it->second->file);
    }
  }
  return set;
}

const TensorInfo* TensorSet::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& TensorSet::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) fail(dir_, ": tensor ", quote_short(name), " not found in the checkpoint");
  return *t;
}

namespace {

// The header of a file holding `tensors` in order, validated (names, shapes) before any file is
// made, padded with spaces so the data region starts 8-byte aligned; sizes[k] = tensor k's bytes.
std::string safetensors_header(const std::string& path, const std::vector<TensorShape>& tensors,
                               const std::map<std::string, std::string>& metadata, std::vector<uint64_t>& sizes) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = meta;
  }
  uint64_t offset = 0;
  sizes.clear();
  for (const TensorShape& t : tensors) {
    std::string at = cat(path, ": tensor ", quote_short(t.name));
    if (t.name.empty() || t.name == kMetadataKey) fail(at, ": invalid tensor name");
    if (header.contains(t.name)) fail(at, ": written twice");
    uint64_t nbytes = uint64_t(dtype_size(t.dtype));
    for (int64_t d : t.shape) {
      if (d < 0) fail(at, ": negative dimension ", d);
      if (__builtin_mul_overflow(nbytes, uint64_t(d), &nbytes)) fail(at, ": shape overflows");
    }
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    sizes.push_back(nbytes);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // a name or metadata value that is not valid UTF-8
    fail(path, ": cannot encode the header (tensor names and metadata must be UTF-8): ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data region 8-byte aligned
  return text;
}

// The file's first bytes: the header's length (little-endian u64), then the header.
void write_header(int fd, const std::string& text, const std::string& tmp) {
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  write_all(fd, len, sizeof len, tmp);
  write_all(fd, text.data(), text.size(), tmp);
}

}  // namespace

void write_safetensors_streamed(const std::string& path, const std::vector<TensorShape>& tensors,
                                const std::map<std::string, std::string>& metadata, const ProduceBytes& produce,
                                size_t chunk_bytes) {
  std::vector<uint64_t> sizes;
  const std::string text = safetensors_header(path, tensors, metadata, sizes);
  uint64_t largest = 0;
  for (uint64_t n : sizes) largest = std::max(largest, n);
  const size_t chunk = size_t(std::max<uint64_t>(1, std::min<uint64_t>(chunk_bytes, largest)));

  write_durably(path, [&](int fd, const std::string& tmp) {
    write_header(fd, text, tmp);
    // Two buffers: one is filled while a second thread writes the other.
    std::vector<std::byte> buffers[2] = {std::vector<std::byte>(chunk), std::vector<std::byte>(chunk)};
    std::thread writer;
    std::exception_ptr write_error;
    auto finish_write = [&] {
      if (writer.joinable()) writer.join();
      if (write_error) std::rethrow_exception(std::exchange(write_error, nullptr));
    };
    struct JoinOnExit {
      std::thread& t;
      ~JoinOnExit() {
        if (t.joinable()) t.join();
      }
    } join_on_exit{writer};
    int current = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      for (uint64_t offset = 0; offset < sizes[k]; offset += chunk) {
        const size_t n = size_t(std::min<uint64_t>(chunk, sizes[k] - offset));
        std::byte* data = buffers[current].data();
        produce(k, offset, std::span<std::byte>(data, n));
        finish_write();
        writer = std::thread([&write_error, fd, data, n, &tmp] {
          try {
            write_all(fd, data, n, tmp);
          } catch (...) {
            write_error = std::current_exception();
          }
        });
        current ^= 1;
      }
    }
    finish_write();
  });
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorShape> shapes;
  for (const TensorToWrite& t : tensors) shapes.push_back({t.name, t.dtype, t.shape});
  // Validate everything before creating any file, so a bad call leaves nothing behind.
  std::vector<uint64_t> sizes;
  const std::string text = safetensors_header(path, shapes, metadata, sizes);
  for (size_t k = 0; k < tensors.size(); ++k)
    if (tensors[k].bytes.size() != sizes[k])
      fail(path, ": tensor ", quote_short(tensors[k].name), ": has ", tensors[k].bytes.size(), " bytes but ",
           dtype_name(tensors[k].dtype), " shape ", json(tensors[k].shape).dump(), " needs ", sizes[k]);
  // The bytes are in memory already: written from where they are (the streamed path would copy them).
  write_durably(path, [&](int fd, const std::string& tmp) {
    write_header(fd, text, tmp);
    for (const TensorToWrite& t : tensors) write_all(fd, t.bytes.data(), t.bytes.size(), tmp);
  });
}

}  // namespace sluice::format
