// The I/O floor: whole-record O_DIRECT random reads through io_uring at a fixed queue depth per
// home, over the same expert records the engine reads (from a manifest) or over a home's files.
// No cache, no checksum, no compute: the bandwidth the drives give to a reader that does nothing else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/manifest.h"

namespace sluice::bench {

struct RecordRef {
  std::string path;  // absolute file path
  uint64_t offset = 0, length = 0;
};

struct RawReadOptions {
  int queue_depth = 4;      // reads in flight per home
  double seconds = 2.0;     // stop after this long...
  uint64_t max_bytes = 0;   // ...or after this many bytes in all (0 = no limit)
  uint64_t seed = 1;        // shuffle of each home's record order
};

struct RawReadResult {
  int queue_depth = 0;
  double seconds = 0;
  uint64_t bytes = 0, reads = 0;
  double bytes_per_s = 0;
  double mean_ms = 0, p99_ms = 0;
  std::vector<uint64_t> home_bytes, home_reads;
  std::vector<double> home_bytes_per_s;  // home bytes / elapsed of the whole measurement
};

// Reads records of all given homes concurrently (one list per home; pass one list to measure a
// home alone). Every read is a whole record, 4 KiB aligned, O_DIRECT.
RawReadResult raw_random_reads(const std::vector<std::vector<RecordRef>>& homes, const RawReadOptions& opt);

// Every expert record present on the homes (local holders), grouped by home, each holder once.
std::vector<std::vector<RecordRef>> manifest_records(const store::Manifest& m);

// Record-sized, 4 KiB-aligned pieces of the regular files under `home` (recursively; the sluice
// JSON markers are skipped). Files smaller than one record are skipped.
std::vector<RecordRef> home_file_records(const std::string& home, uint64_t record_bytes);

}  // namespace sluice::bench
