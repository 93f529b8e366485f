// `sluice bench drives`: each home's O_DIRECT read ceiling for whole-expert reads at several queue
// depths, alone and all homes together; results go to <home>/sluice-drive.json and, with a model,
// into its manifest's read_bytes_per_s (what the reader's holder choice starts from).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "store/expert_bank.h"

namespace sluice::bench {

struct DriveOptions {
  std::vector<std::string> homes;
  std::vector<int> depths = {1, 2, 4, 8, 16};
  std::string model;            // optional: read its expert records, update its manifest
  uint64_t record_bytes = 0;    // 0: the model's slot size, else 2 MiB
  double seconds = 2;           // per measurement
  int store_queue_depth = 4;    // the depth whose bandwidth is stored for the reader
  uint64_t probe_bytes = 0;     // > 0: write <home>/sluice-drive-probe.bin of this size if a home has too little data
  bool write_home_files = true;
  std::function<void(const std::string&)> log;
  // The expert bank of the model's config.json (model::expert_bank_from_config); required with model.
  store::ExpertBankFromConfig expert_bank;
};

// Measures and stores; returns the full result (also written to --out when the CLI asks).
nlohmann::json measure_drives(const DriveOptions& opt);

// The bandwidth-vs-queue-depth chart of a result.
std::string drives_chart_svg(const nlohmann::json& result);

}  // namespace sluice::bench
