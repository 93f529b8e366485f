// SSE framing and lenient JSON encoding.
#include "serve/sse.h"

namespace sluice::serve {

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string sse_named_event(const Json& j) {
  return "event: " + j.value("type", std::string("message")) + "\ndata: " + dump_json(j) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace sluice::serve
