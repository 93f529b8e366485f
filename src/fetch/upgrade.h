// `sluice upgrade`: migrates an installation made by an older sluice to the current layout in
// place. The formats are a versioned list; each step rewrites only metadata (never expert bytes
// or shards), keeps a backup of the file it changes, and is validated before it replaces it.
#pragma once
#include <string>
#include <vector>

#include "store/expert_bank.h"

namespace sluice::fetch {

struct FormatVersion {
  int version;
  const char* what;  // what this version of the expert manifest added
};
// Every expert-manifest version this sluice knows, oldest first; the last is current.
const std::vector<FormatVersion>& manifest_versions();

struct UpgradeResult {
  int from = 0, to = 0;
  std::string backup;  // path of the saved old manifest ("" if nothing changed)
};

// Throws naming the file for an unknown or newer layout. Already current: from == to, no change.
// `bank` is the model's (model::expert_bank_of(model_dir)): the result is validated against it.
UpgradeResult upgrade_install(const std::string& model_dir, const store::ExpertBank& bank);

}  // namespace sluice::fetch
