// The state cache's flags (see state_cache_flags.h).
#include "cli/state_cache_flags.h"

#include "cli/arg_lists.h"

namespace sluice::cli {

void add_state_cache_flags(CLI::App* sub, runtime::EngineOptions& eo) {
  sub->add_option("--state-cache", eo.state_cache_dir,
                  "Directory of saved sequence states: a prompt that extends a saved prefix (also after a restart) "
                  "restores it instead of prefilling; each finished generation is saved, and for models with "
                  "recurrent layers (K3, Kimi-Linear) also their state where a prompt leaves a saved one, so a new "
                  "conversation that shares only a system prompt with saved ones resumes after it");
  sub->add_option("--state-cache-gb", eo.state_cache_gb,
                  "Disk budget of --state-cache for this model (GB); the least recently used states go first")
      ->default_val(8.0)
      ->transform(positive_number(1e6));
  sub->add_option("--prefix-cache-gb", eo.prefix_cache_gb,
                  "RAM for recent prompts' states (GB; 0: none): a prompt that shares a prefix with any recent "
                  "one prefills only the rest")
      ->default_val(2.0)
      ->transform(number_in(0, 1e6));
  sub->add_option("--prefix-block", eo.prefix_block,
                  "For models with recurrent layers (K3, Kimi-Linear): keep their state every N prompt positions, "
                  "the finest point a later prompt can resume from (prefill passes end there; 0: at pass ends "
                  "only). Default 1024 with experts in memory, 0 when they stream (each pass reads its experts)")
      ->transform(integer_in(0, int64_t(1) << 40));
}

}  // namespace sluice::cli
