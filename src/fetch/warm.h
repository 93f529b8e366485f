// `sluice warm`: reads a router trace (`sluice run --router-trace`), ranks the experts it used by
// how often, reports how many are local and how many bytes are still to fetch (the plan), and
// with fetch_n > 0 fetches the most used not-yet-local experts of a --stream install now.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/expert_bank.h"

namespace sluice::fetch {

struct RouterTrace {
  int64_t num_layers = 0, num_experts = 0;
  uint64_t requests = 0;
  std::vector<uint64_t> uses;  // [layer * num_experts + expert]: requests naming it
};

// Validates every line; errors name the file and line.
RouterTrace read_router_trace(const std::string& path);

struct WarmReport {
  uint64_t used = 0, local = 0, missing = 0, fetched = 0;
  uint64_t bytes_missing = 0;  // of used experts not local before fetching
  struct Entry {
    int layer, expert;
    uint64_t uses;
    bool local;
  };
  std::vector<Entry> ranked;  // used experts, most used first
};

// `bank` is the model's (model::expert_bank_of(model_dir)).
WarmReport warm(const std::string& model_dir, const store::ExpertBank& bank, const std::string& trace_path,
                int64_t fetch_n, bool quiet = false);

}  // namespace sluice::fetch
