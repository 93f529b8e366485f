// Router trace parsing (the format runtime::RouteRecorder writes).
#include "store/route_trace.h"

#include <fstream>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::store {

RouteTrace read_route_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--trace ", path, ": cannot open");
  RouteTrace t;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::string w = cat(path, ": line ", n);
    nlohmann::json j = format::parse_json_text(line, w);
    if (n == 1) {
      if (format::get_string_or(j, "format", "", w) != "sluice-router-trace")
        fail(w, ": not a sluice router trace (expected a first line with format 'sluice-router-trace')");
      if (format::get_int(j, "version", w) != 1) fail(w, ": router trace version must be 1");
      t.num_layers = format::get_int(j, "num_layers", w);
      t.num_experts = format::get_int(j, "num_experts", w);
      if (t.num_layers <= 0 || t.num_experts <= 0 || t.num_layers * t.num_experts > (int64_t(1) << 26))
        fail(w, ": num_layers/num_experts out of range");
      continue;
    }
    if (t.num_layers == 0) fail(w, ": not a sluice router trace (its first line is empty)");
    int64_t layer = format::get_int(j, "layer", w);
    if (layer < 0 || layer >= t.num_layers) fail(w, ": layer ", layer, " is not in [0, ", t.num_layers, ")");
    for (int64_t e : format::get_int_list(j, "experts", w)) {
      if (e < 0 || e >= t.num_experts) fail(w, ": expert ", e, " is not in [0, ", t.num_experts, ")");
      t.keys.push_back(uint32_t(layer * t.num_experts + e));
    }
    t.ends.push_back(t.keys.size());
  }
  if (n == 0) fail("--trace ", path, ": empty file");
  return t;
}

}  // namespace sluice::store
