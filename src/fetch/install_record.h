// What a setup installed and from where: sluice-source.json in the model directory. It keeps the
// source (URL or directory), every small file and shard with size and SHA-256, and the source
// shards' safetensors headers, so that routed experts can be fetched later by Range request and
// `sluice verify --repair` can re-fetch any piece without asking the source for its layout again.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fetch/source.h"
#include "format/safetensors.h"

namespace sluice::fetch {

inline constexpr const char* kRecordName = "sluice-source.json";
inline constexpr const char* kRecordFormat = "sluice-install";
inline constexpr int kRecordVersion = 1;

struct FileEntry {
  std::string name;
  uint64_t size = 0;
  std::string sha256;         // of the bytes installed locally (always known)
  std::string source_sha256;  // what the source stated, if anything
};

struct SourceShard {
  std::string name;
  uint64_t size = 0;
  std::string sha256;  // stated by the source (SHA256SUMS or an LFS ETag); may be empty
  std::string header;  // the header JSON text (bytes 8 .. 8 + header length)
  std::vector<format::TensorInfo> tensors;  // parsed from `header` (absolute file offsets)
};

struct InstallRecord {
  std::string source;  // as given to setup
  std::string mode;    // "full" or "stream"
  bool indexed = true;  // the source has model.safetensors.index.json (else one model.safetensors)
  std::vector<FileEntry> files;         // config, tokenizer, generation config, index
  std::vector<SourceShard> shards;      // the source's safetensors files
  std::vector<FileEntry> local_shards;  // safetensors files written locally (full: the shards)

  const SourceShard& shard(const std::string& name) const;
};

std::string record_path(const std::string& model_dir);
void write_record(const InstallRecord& r, const std::string& model_dir);
// Reads and validates sluice-source.json (headers are parsed again and checked).
InstallRecord read_record(const std::string& model_dir);
// Same, from the record's text; `where` (its path) starts every error.
InstallRecord parse_record(const std::string& text, const std::string& where);

// Small files setup copies when the source has them (config.json is required).
const std::vector<std::string>& small_file_names();

// Learns a source's layout without downloading any shard: SHA256SUMS (optional), config.json,
// the index (or model.safetensors), and each shard's size and header through Range requests.
InstallRecord survey_source(Source& src, const std::string& given);

// Reads "SHA256SUMS" (sha256sum's format) if the source has one: file name -> hex.
std::map<std::string, std::string> read_sha256sums(Source& src);

}  // namespace sluice::fetch
