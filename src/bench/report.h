// Benchmark reports: results.json (everything), runs.csv (one row per run), summary.csv and
// results.md (one row per arm group, with ratios) and SVG/PNG charts, all under --out.
#pragma once
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/svg.h"

namespace sluice::bench {

// Writes every report file; returns the paths written.
std::vector<std::string> write_reports(const BenchOptions& opt, const BenchResult& res);

// Per-home read bandwidth over time (MB/s in windows of about `window_s`) of one run, from device
// counters when each home has its own device, else the engine's per-step total from the events.
Chart bandwidth_timeline(const RunRecord& run, double window_s);

// The Markdown table of the groups (also printed by the CLI).
std::string markdown_table(const BenchResult& res);

}  // namespace sluice::bench
