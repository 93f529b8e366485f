// The expert manifest: which homes (directories, each meant to be its own drive) hold which
// experts, where (file, offset, length) and with which xxh3 checksum, plus each home's measured
// read bandwidth. Versioned JSON written atomically; a corrupt or foreign manifest is refused.
// Version 2 adds `local` per holder: false for an expert of a streamed install not fetched yet.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/expert_bank.h"

namespace sluice::store {

inline constexpr int kManifestVersion = 2;
inline constexpr const char* kManifestFormat = "sluice-expert-manifest";

struct Home {
  std::string path;  // absolute; a relative path in a manifest is resolved against the manifest's directory
  uint64_t capacity_bytes = 0;  // 0 = unlimited
  double read_bytes_per_s = 0;  // measured by prepare (or `sluice bench drives`); 0 = unknown
};

struct Holder {
  int home = 0;
  std::string file;  // relative to the home
  uint64_t offset = 0, length = 0;
  uint64_t xxh3 = 0;
  bool local = true;  // false: the record is not in the home yet (fetched on first use); xxh3 unknown
};

struct Manifest {
  std::string model_id;  // hash of config.json and the expert layout
  ExpertLayout layout;
  int64_t num_layers = 0, num_experts = 0;
  std::vector<Home> homes;
  // holders[layer][expert]; empty for dense layers
  std::vector<std::vector<std::vector<Holder>>> holders;

  const std::vector<Holder>& of(int layer, int expert) const;
  uint64_t bytes_on_home(int home) const;
};

// Identity of a model's expert bank: xxh3 of its config.json text and expert layout (each segment's
// key, offset and size; for the Kimi bank the same string manifests were always keyed on).
std::string model_identity(const std::string& config_text, const ExpertLayout& layout);

// Where the manifest of a model directory lives.
std::string manifest_path(const std::string& model_dir);

void write_manifest(const Manifest& m, const std::string& path);
// Reads and validates; `bank` (the model's, from its config.json) and `model_id` must match (else
// the manifest is foreign).
Manifest read_manifest(const std::string& path, const ExpertBank& bank, const std::string& model_id);
// Same, from the text of a manifest read from `path` (named in errors; relative homes resolve
// against its directory).
Manifest parse_manifest(const std::string& text, const std::string& path, const ExpertBank& bank,
                        const std::string& model_id);

}  // namespace sluice::store
