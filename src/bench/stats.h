// Benchmark statistics: per-run metrics derived from one `sluice run --events` log plus the
// harness's process wall clock, and per-arm summaries (median, min, max, ratio to the first arm)
// over the valid runs only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::bench {

struct Summary {
  int n = 0;  // values summarised (NaNs are skipped)
  double median = 0, min = 0, max = 0, mean = 0;
};

// Median (mean of the middle two for even counts), min, max and mean of the finite values.
Summary summarize(std::vector<double> values);

// a / b, or NaN when b is 0 or either is not finite (a ratio that cannot be formed is not 0).
double ratio(double a, double b);

struct HomeRun {
  std::string path;
  uint64_t reads = 0, bytes = 0;
  double mean_ms = 0, p99_ms = 0;
  double bytes_per_s = 0;  // bytes / engine time (prefill + decode)
};

struct RunMetrics {
  bool valid = true;
  std::string invalid_reason;
  std::vector<int32_t> prompt, output;  // output: completion ids from run_end
  std::string stop_reason;
  int64_t generated = 0;
  double wall_s = 0;        // process launch to exit, measured by the harness
  double load_s = 0;        // wall_s minus the engine's own clock (load, exit)
  double ttft_s = 0;        // prefill_done duration: run start (model loaded) to the first token
  double decode_s = 0;      // first token to last token
  double steady_tps = 0;    // (generated - 1) / decode_s
  double inclusive_tps = 0; // generated / wall_s
  int64_t proposed = 0, accepted = 0;
  double acceptance = 0;    // accepted / proposed, NaN when nothing was proposed
  uint64_t prefill_bytes = 0, decode_bytes = 0;  // expert bytes read in each phase
  double bytes_per_token = 0;       // decode expert bytes / decode tokens (generated - 1)
  double decode_read_bytes_per_s = 0;  // decode expert bytes / decode_s
  double hit_rate = 0, prefetch_recall = 0;
  int64_t expert_requests = 0;      // model's per-pass union requests (from run_end stats)
  int64_t prefill_requests = -1;    // of those, made by the prefill (prefill_done; -1: not logged)
  int64_t cache_slots = 0;          // the expert cache's slots (run_end stats; 0: not streaming)
  // A GPU host's device tier (the steps' gpu_tier; gpu_tier false: none): in the decode steps, the
  // experts asked of it, found in HBM, computed on the host's cores, and bytes copied into HBM;
  // the prefill's bytes copied.
  bool gpu_tier = false;
  uint64_t decode_tier_requests = 0, decode_tier_hits = 0, decode_on_host = 0, decode_tier_bytes = 0;
  uint64_t prefill_tier_bytes = 0;
  std::vector<HomeRun> homes;
  // Per-step timeline: seconds since run start at the end of each step, and expert bytes read in it.
  std::vector<double> step_end_s;
  std::vector<uint64_t> step_bytes;
};

// Parses a JSON-lines events log (run_start, prefill_done, decode_step..., run_end). A log without
// run_end, or with accounting that does not add up, yields a run marked invalid with the reason.
RunMetrics metrics_from_events(const std::vector<nlohmann::json>& events, double wall_s);
std::vector<nlohmann::json> read_events_file(const std::string& path);

// How far `got` follows `ref`: the tokens equal before the first difference, and the share of
// positions (over the longer of the two) that hold the same token.
struct Agreement {
  size_t prefix = 0;
  double share = 0;
};
Agreement agreement(const std::vector<int32_t>& ref, const std::vector<int32_t>& got);

// Marks runs invalid whose output differs from `expected` (when given) or else from the first valid
// run's output; returns the reference output used (empty if there was no valid run).
std::vector<int32_t> check_outputs(std::vector<RunMetrics*>& runs, const std::vector<int32_t>* expected);

struct ArmSummary {
  std::string name;
  int runs = 0, valid = 0;
  Summary ttft_s, steady_tps, inclusive_tps, acceptance, bytes_per_token, decode_read_bytes_per_s, hit_rate,
      prefetch_recall, prefill_bytes, wall_s;
  std::vector<std::string> home_paths;
  std::vector<Summary> home_bytes_per_s;
  double steady_ratio = 0, inclusive_ratio = 0, ttft_ratio = 0;  // medians over the first arm's medians
};

// Summaries over valid runs only; ratios are to `baseline` (pass nullptr for the first arm itself).
ArmSummary summarize_arm(const std::string& name, const std::vector<const RunMetrics*>& runs,
                         const ArmSummary* baseline);

nlohmann::json to_json(const Summary& s);
nlohmann::json to_json(const RunMetrics& r);
nlohmann::json to_json(const ArmSummary& a);

}  // namespace sluice::bench
