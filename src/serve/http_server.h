// The HTTP front of the OpenAI-compatible server (cpp-httplib): routes, API-key check, body-size
// limit, OpenAI-shaped errors for every failure, SSE streaming, disconnect detection, and a
// graceful stop on SIGINT/SIGTERM.
#pragma once
#include "serve/service.h"

namespace sluice::serve {

// Blocks SIGINT and SIGTERM in the calling thread and so in every thread it starts afterwards:
// call it before the Service (whose engine may start reader threads) exists, so that serve_http's
// waiting thread is the only one a stop signal can go to.
void block_stop_signals();

// Serves until SIGINT or SIGTERM; returns the process exit status. Prints one "listening" line
// on stderr once the port is bound (tests wait for it).
int serve_http(Service& service);

}  // namespace sluice::serve
