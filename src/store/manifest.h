// The expert manifest: which homes (directories, each meant to be its own drive) hold which
// experts, where (file, offset, length) and with which xxh3 checksum, plus each home's measured
// read bandwidth. Versioned JSON written atomically; a corrupt or foreign manifest is refused.
// Version 2 adds `local` per holder: false for an expert of a streamed install not fetched yet.
// Version 3 adds `at` per holder: a record may be striped, each holder then holding the part of it
// that starts `at` bytes into the record (absent: 0, the whole record).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/expert_bank.h"

namespace sluice::store {

inline constexpr int kManifestVersion = 3;
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
  // Where this holder's bytes start in the record. A record is read whole from one holder, or,
  // striped, in parts from several: the holders with the same `at` are copies of one part (same
  // length, each with its own xxh3), and the parts tile the slot.
  uint64_t at = 0;
};

// One part of a record: bytes [at, at + length) of its slot.
struct Part {
  uint64_t at = 0, length = 0;
  bool operator==(const Part&) const = default;
};
// The parts of a record, in order (one part, {0, slot_bytes}, for a record held whole).
std::vector<Part> parts_of(const std::vector<Holder>& holders);
// The same into out (no allocation once it has room).
void parts_of(const std::vector<Holder>& holders, std::vector<Part>& out);
// How many whole copies of a record its holders make: the holders of its first part.
size_t copies_of(const std::vector<Holder>& holders);

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
