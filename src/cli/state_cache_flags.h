// --state-cache DIR and --state-cache-gb N, for every command that generates through a Session
// (serve; run and chat add them with one call): the engine then restores the longest saved prefix
// of each prompt from DIR and saves each finished state there (runtime/state_cache.h).
#pragma once
#include <CLI/CLI.hpp>

#include "runtime/engine.h"

namespace sluice::cli {

void add_state_cache_flags(CLI::App* sub, runtime::EngineOptions& eo);

}  // namespace sluice::cli
