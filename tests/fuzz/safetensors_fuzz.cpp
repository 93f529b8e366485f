// libFuzzer target for the safetensors header parser: the input is a whole file (8-byte length,
// header JSON, data). Parsing may only succeed or throw sluice::Error, and what it accepts must
// describe tensors that lie inside the data region without overlapping.
// fuzz-sources: src/format/safetensors.cpp src/format/json_util.cpp src/core/dtype.cpp src/core/regular_file.cpp
// fuzz-sources: src/core/durable_file.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "core/error.h"
#include "format/safetensors.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::format;
  if (size < 8) return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(data[i]) << (8 * i);
  if (header_len > size - 8) return 0;  // SafetensorsFile::open rejects this before parsing
  uint64_t data_size = size - 8 - header_len;
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;
  try {
    tensors = parse_safetensors_header(bytes + 8, size_t(header_len), data_size, "fuzz-input", &metadata);
  } catch (const Error&) {
    return 0;
  }
  // Accepted: every tensor must be well-formed, in bounds and disjoint from the previous one
  // (the parser returns them in file order). Touch each byte so ASan sees any stray view.
  uint64_t prev_end = 8 + header_len;
  unsigned sum = 0;
  for (const TensorInfo& t : tensors) {
    check(!t.name.empty() && t.name != "__metadata__");
    check(t.nbytes == uint64_t(t.numel()) * uint64_t(dtype_size(t.dtype)));
    check(t.file_offset >= 8 + header_len && t.file_offset + t.nbytes <= size);
    if (t.nbytes) {
      check(t.file_offset >= prev_end);
      prev_end = t.file_offset + t.nbytes;
    }
    for (size_t i = 0; i < t.nbytes; ++i) sum += unsigned(data[t.file_offset + i]);
  }
  return int(sum & 0);
}
