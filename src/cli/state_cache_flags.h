// --state-cache DIR, --state-cache-gb N, --prefix-cache-gb N and --prefix-block N, for every
// command that generates through a Session (serve; run and chat add them with one call): the
// engine then restores the longest prefix of each prompt that its RAM prefix cache
// (runtime/prefix_cache.h) or DIR holds, and saves each finished state in DIR
// (runtime/state_cache.h).
#pragma once
#include <CLI/CLI.hpp>

#include "runtime/engine.h"

namespace sluice::cli {

void add_state_cache_flags(CLI::App* sub, runtime::EngineOptions& eo);

}  // namespace sluice::cli
