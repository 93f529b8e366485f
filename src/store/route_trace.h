// Router traces read back: the (layer, experts) requests `sluice run --router-trace` wrote
// (runtime/router_trace.h), in order. Used by `sluice warm` (which experts a workload needs) and
// by the bench's cache floors (which reads any cache of a budget must make for them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::store {

struct RouteTrace {
  int64_t num_layers = 0, num_experts = 0;
  // Every request's experts as keys layer·num_experts + expert, requests one after another;
  // request i is keys[ends[i-1] .. ends[i]) (ends[-1] = 0).
  std::vector<uint32_t> keys;
  std::vector<uint64_t> ends;
  uint64_t requests() const { return ends.size(); }
};

// Validates every line; an error names the file and the line.
RouteTrace read_route_trace(const std::string& path);

}  // namespace sluice::store
