// `sluice verify`: re-checks an installation against its records — every small file and shard
// (size, SHA-256), the manifest, every home file's size and every local expert record's xxh3 —
// and reports problems without changing anything. With repair, bad pieces are fetched again from
// the source (whole files, or single expert records by Range request) and checked again.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fetch/source.h"
#include "store/expert_bank.h"

namespace sluice::fetch {

struct VerifyReport {
  std::vector<std::string> problems;  // found (and, with repair, fixed unless listed in unfixed)
  std::vector<std::string> unfixed;   // problems repair could not fix
  std::vector<std::string> repaired;
  uint64_t files_checked = 0, experts_checked = 0, experts_missing = 0;  // missing: not fetched yet (stream)
  bool repair = false;
  // Without repair: nothing wrong. With repair: everything wrong was fixed.
  bool ok() const { return repair ? unfixed.empty() : problems.empty(); }
};

// `expert_bank` (model::expert_bank_from_config) describes the experts of the model's config.json,
// asked only after the config itself was checked (and, with repair, fixed).
VerifyReport verify_install(const std::string& model_dir, const store::ExpertBankFromConfig& expert_bank, bool repair,
                            const SourceOptions& opt = {}, bool quiet = false);

}  // namespace sluice::fetch
