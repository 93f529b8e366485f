// `sluice bench run`: cold-process runs of several arms (extra `sluice run` flags) interleaved
// A B B A ..., each checked against an expectation or the first valid run, optional raw-read floor
// measurements of the same expert files in the same rotation, then per-arm summaries and derived
// ratios (read bandwidth / raw bandwidth, decode time / floors, prefill bytes / union bytes).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/process.h"
#include "bench/raw_read.h"
#include "bench/stats.h"
#include "store/expert_bank.h"

namespace sluice::bench {

struct ArmSpec {
  std::string name;
  std::vector<std::string> flags;  // extra `sluice run` arguments; `--model X` replaces the bench's model
  std::string binary;              // `--binary PATH` in FLAGS: this arm runs another sluice build
  // `--peer 'CMD ARGS'` in FLAGS: this arm runs another engine through CMD (e.g. `node
  // bench/peer/llama.mjs`), called as `CMD ARGS --model M --prompt-ids IDS --max-new N --events PATH
  // FLAGS...`; it writes the events log `sluice run --events` writes. A peer's tokens are not held
  // to the others' (another engine may round differently): its agreement with them is reported.
  std::vector<std::string> peer;
};

// "NAME:FLAGS" (FLAGS split on blanks; single or double quotes group). NAME is [A-Za-z0-9_.-]+.
// A `--binary PATH` among the flags is taken out and names the executable of this arm (two builds
// side by side in one bracket); so is `--peer CMD`.
ArmSpec parse_arm(const std::string& spec);
std::vector<std::string> split_flags(const std::string& text);

// The model directory an arm runs (its --model flag, else `base`).
std::string arm_model(const ArmSpec& arm, const std::string& base);

// The bytes of a model: the files of a directory (recursively, symlinks followed) or one file.
uint64_t model_bytes(const std::string& path);

// Order of (arm) indices for repetition `rep`: forward on even reps, reversed on odd (A B B A).
std::vector<int> rotation(int arms, int rep);

struct BenchOptions {
  std::string binary;  // the sluice executable
  std::string model;
  std::vector<int32_t> prompt;
  std::vector<int64_t> max_new;  // one or more output lengths; each is its own group per arm
  std::vector<ArmSpec> arms;
  int reps = 2;
  std::optional<std::vector<int32_t>> expect_ids;
  std::optional<std::string> expect_text;  // compared with `sluice detokenize` of each output
  std::string out_dir;
  // Raw O_DIRECT reads of each arm model's expert records, per rep; and each run's router trace,
  // for the reads any cache of its budget must make (MIN) and those LRU would (cache_floor.h).
  bool floor = false;
  int floor_queue_depth = 4;
  double floor_seconds = 2;
  std::string compute_arm;     // arm whose decode time per token is the compute floor
  double sample_ms = 50;
  // Each run in a cgroup v1 memory cgroup of this many bytes (memory and page cache together; 0:
  // none), or of this fraction of its model's bytes (the model directory's files, or the peer's
  // model file).
  uint64_t memory_limit_bytes = 0;
  double memory_limit_fraction = 0;
  // Before each run, drop the page cache of its model's files and its homes' expert files.
  bool cold = false;
  std::function<void(const std::string&)> log;
  // The expert bank of an arm model's config.json (model::expert_bank_from_config), to read its
  // manifest; required when a model has one.
  store::ExpertBankFromConfig expert_bank;
};

struct HomeSamples {
  std::string home, stat_file;  // stat_file empty: device unknown
  bool shared_device = false;   // another home of the run is on the same device
  std::vector<double> t_s;      // since process launch
  std::vector<uint64_t> bytes;  // cumulative device bytes read since launch
};

struct RunRecord {
  int seq = 0, rep = 0, arm = 0, length = 0;  // arm index, index into max_new
  std::string group, model, events_path;
  std::string trace_path;  // its router trace (with floors, on a model with a manifest)
  ProcessResult proc;
  RunMetrics m;
  std::string text;  // detokenized output (only with expect_text)
  std::vector<HomeSamples> samples;
  bool peer = false;
  uint64_t memory_limit_bytes = 0;      // its cgroup's limit (0: none)
  int64_t cgroup_peak_bytes = -1;       // memory + page cache at the peak, within its cgroup
  uint64_t limit_hits = 0;              // allocations that met the limit
  bool oom_killed = false;
  // A peer's output against the reference (the expectation, else the first valid non-peer run of
  // its length): tokens equal before the first difference, and the share of positions equal.
  int64_t agree_prefix = -1;
  double agree_share = -1;
};

struct FloorRecord {
  int seq = 0, rep = 0;
  std::string model;
  RawReadResult r;
};

struct GroupResult {
  std::string name, arm, model;
  int64_t max_new = 0;
  ArmSummary summary;
  nlohmann::json derived;  // floors and ratios
};

struct BenchResult {
  std::vector<RunRecord> runs;
  std::vector<FloorRecord> floors;
  std::vector<GroupResult> groups;
};

// "SIZE" (bytes, with K/M/G/T) or "Fx" (a fraction of each run's model bytes, e.g. 0.333x) for
// --memory-limit, into `opt`.
void parse_memory_limit(const std::string& text, BenchOptions& opt);

BenchResult run_bench(const BenchOptions& opt);

// Derived ratios for each group (needs runs and floors); fills groups[i].derived.
void derive(const BenchOptions& opt, BenchResult& res);

}  // namespace sluice::bench
