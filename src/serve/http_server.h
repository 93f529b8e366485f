// The HTTP front of the OpenAI-compatible server (cpp-httplib): routes, API-key check, body-size
// limit, OpenAI-shaped errors for every failure, SSE streaming, disconnect detection, and a
// graceful stop on SIGINT/SIGTERM.
#pragma once
#include "serve/service.h"

namespace sluice::serve {

// Serves until SIGINT or SIGTERM; returns the process exit status. Prints one "listening" line
// on stderr once the port is bound (tests wait for it).
int serve_http(Service& service);

}  // namespace sluice::serve
