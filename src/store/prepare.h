// `sluice prepare`: packs the routed experts out of the safetensors shards into expert files on
// one or more homes (4 KiB-aligned records), places them (each layer balanced across homes by
// bytes, an optional full copy on one home, replicas of the hottest experts within each home's
// capacity; or every record striped across the homes, each home holding a part of it in
// proportion to its read rate), measures each home's read bandwidth and writes the manifest
// atomically.
// Resumable: finished layer files are kept; a home holding another model is refused. --rebalance
// re-places an install from its own homes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/heat.h"
#include "store/manifest.h"

namespace sluice::store {

struct PrepareOptions {
  std::vector<Home> homes;
  int full_copy_home = -1;       // index into homes, or -1
  double replicate_hot = 0;      // fraction of experts (hottest first) to give a second home
  std::string heat_file;         // usage counts for replica ranking (default: the model's own)
  bool measure = true;           // time O_DIRECT reads on each home
  // Read rates (bytes/s) per home that place each layer's experts in proportion: a home that reads
  // twice as fast holds twice the share, so the drives of one layer's reads finish together. Empty
  // (or any unknown, 0): the rates `sluice bench drives` stored in each <home>/sluice-drive.json
  // when every home has one, else equal shares.
  std::vector<double> speeds;
  // Re-place an existing install (after a new `sluice bench drives` measurement, or onto other
  // homes) from the records on its current homes, checked against the manifest's checksums, without
  // reading the checkpoint. Files that change are written beside the old ones and the old ones are
  // removed only after the new manifest is in place: a crash leaves the old install whole. Homes
  // default to the manifest's.
  bool rebalance = false;
  // Striping: each record split across the homes in parts proportional to their read rates, so a
  // token's few large reads keep every drive busy and finish together, instead of each record
  // waiting on the one drive that holds it. Auto: on with two or more homes, no replicas, and
  // records large enough that every part is at least kMinStripePart.
  enum class Stripe { Auto, On, Off } stripe = Stripe::Auto;
  std::function<void(uint64_t done, uint64_t total, const std::string& what)> progress;
};

// The read rates `sluice bench drives` stored in each home's sluice-drive.json (bytes/s), in home
// order; empty when a home has none (or an unreadable one).
std::vector<double> measured_drive_speeds(const std::vector<Home>& homes);

// Placement only (no I/O): holders per (layer, expert) as home indices, primary first. Primaries
// go to homes in proportion to opt.speeds (equal shares when empty).
std::vector<std::vector<std::vector<int>>> place_experts(const ExpertBank& bank, uint64_t slot_bytes,
                                                         const PrepareOptions& opt, const Heat* heat);

// Smallest part `--stripe auto` cuts a record into. On the loop-drive ladder striping paid where
// the slowest drive's part was 0.5 MiB (3 MiB records) and lost where it was 0.27 MiB (1.6 MiB
// records): smaller reads cost more than the balance gains (docs/BENCHMARKS.md, "Design
// measurements behind code comments"). Real checkpoints' records are 10-45 MB, far above it.
inline constexpr uint64_t kMinStripePart = 512 << 10;

// The part of every record each home holds when striped (length 0: none), in proportion to
// `speeds` (equal shares when empty or any is unknown), in 4 KiB pages: the parts tile the slot in
// home order.
std::vector<Part> stripe_parts(uint64_t slot_bytes, const std::vector<double>& speeds, size_t homes);
// Whether prepare stripes with these options (throws naming the conflict for Stripe::On).
bool use_stripes(const ExpertBank& bank, uint64_t slot_bytes, const PrepareOptions& opt);

// Where an install's records go: the homes that hold each (layer, expert), primary first, and the
// part of a record each home holds (the whole record, or its stripe; length 0: none). Striped
// when use_stripes says so (every record on every home with a part), else place_experts.
struct RecordPlacement {
  std::vector<std::vector<std::vector<int>>> holders;
  std::vector<Part> part_on;
};
RecordPlacement place_records(const ExpertBank& bank, uint64_t slot_bytes, const PrepareOptions& opt,
                              const Heat* heat);

// `bank` is the model's (model::expert_bank_of(model_dir)); its config.json keys the identity.
Manifest prepare_experts(const std::string& model_dir, const ExpertBank& bank, const PrepareOptions& opt);

// Marks `home` as holding the experts of `model_id` (sluice-home.json); refuses a home of another model.
void claim_home(const Home& home, const std::string& model_id);
// Refuses (throws naming both ids) a home whose marker names another model; writes nothing.
// Returns whether the home is marked as this model's already.
bool check_home(const Home& home, const std::string& model_id);
// The file (relative to a home) that holds a layer's expert records.
std::string expert_file(const std::string& model_id, int64_t layer);

// Parses "PATH[:CAPACITY]" where CAPACITY is bytes with an optional K/M/G/T suffix (powers of
// 1000); text after the last ':' must be a capacity. Throws naming the spec.
Home parse_home_spec(const std::string& spec);

// O_DIRECT read bandwidth of a home over up to `max_bytes` of the given files (bytes/s).
double measure_read_bandwidth(const std::string& home, const std::vector<std::string>& files, uint64_t max_bytes);

}  // namespace sluice::store
