// The state cache's flags (see state_cache_flags.h).
#include "cli/state_cache_flags.h"

#include "cli/arg_lists.h"

namespace sluice::cli {

void add_state_cache_flags(CLI::App* sub, runtime::EngineOptions& eo) {
  sub->add_option("--state-cache", eo.state_cache_dir,
                  "Directory of saved sequence states: a prompt that extends a saved prefix (also after a restart) "
                  "restores it instead of prefilling; each finished generation is saved");
  sub->add_option("--state-cache-gb", eo.state_cache_gb,
                  "Disk budget of --state-cache for this model (GB); the least recently used states go first")
      ->default_val(8.0)
      ->transform(positive_number(1e6));
}

}  // namespace sluice::cli
