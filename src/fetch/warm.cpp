// Router trace parsing, warm planning and fetching of the most used missing experts.
#include "fetch/warm.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/arena.h"
#include "core/error.h"
#include "fetch/stream_source.h"
#include "format/json_util.h"
#include "store/manifest.h"

namespace sluice::fetch {

RouterTrace read_router_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--trace ", path, ": cannot open");
  RouterTrace t;
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
      t.uses.assign(size_t(t.num_layers * t.num_experts), 0);
      continue;
    }
    int64_t layer = format::get_int(j, "layer", w);
    if (layer < 0 || layer >= t.num_layers) fail(w, ": layer ", layer, " is not in [0, ", t.num_layers, ")");
    for (int64_t e : format::get_int_list(j, "experts", w)) {
      if (e < 0 || e >= t.num_experts) fail(w, ": expert ", e, " is not in [0, ", t.num_experts, ")");
      t.uses[size_t(layer * t.num_experts + e)] += 1;
    }
    ++t.requests;
  }
  if (n == 0) fail("--trace ", path, ": empty file");
  return t;
}

WarmReport warm(const std::string& model_dir, const store::ExpertBank& bank, const std::string& trace_path,
                int64_t fetch_n, bool quiet) {
  RouterTrace t = read_router_trace(trace_path);
  std::ifstream cin(model_dir + "/config.json", std::ios::binary);
  std::stringstream ss;
  ss << cin.rdbuf();
  if (t.num_layers != bank.num_layers || t.num_experts != bank.num_experts)
    fail("--trace ", trace_path, ": recorded for ", t.num_layers, " layers x ", t.num_experts,
         " experts, but this model has ", bank.num_layers, " x ", bank.num_experts);
  const store::ExpertLayout& layout = bank.layout;
  store::Manifest m = store::read_manifest(store::manifest_path(model_dir), bank, store::model_identity(ss.str(), layout));
  replay_journal(model_dir, m);
  WarmReport r;
  for (int64_t l = 0; l < t.num_layers; ++l)
    for (int64_t e = 0; e < t.num_experts; ++e) {
      uint64_t u = t.uses[size_t(l * t.num_experts + e)];
      if (!u) continue;
      if (m.holders[size_t(l)].empty()) fail("--trace ", trace_path, ": layer ", l, " has no routed experts in this model");
      bool local = m.of(int(l), int(e))[0].local;
      r.ranked.push_back({int(l), int(e), u, local});
      ++r.used;
      if (local) ++r.local;
      else {
        ++r.missing;
        r.bytes_missing += layout.slot_bytes;
      }
    }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](auto& a, auto& b) { return a.uses > b.uses; });
  if (fetch_n <= 0 || r.missing == 0) return r;
  auto src = StreamSource::open(model_dir, bank);
  if (!src) fail(model_dir, ": experts are missing but there is no ", kRecordName, " to fetch them from");
  // The most used missing experts, grouped by layer so each layer's batch is fetched in parallel.
  std::vector<std::vector<int32_t>> by_layer(size_t(bank.num_layers));
  int64_t picked = 0;
  for (const auto& e : r.ranked) {
    if (e.local || picked >= fetch_n) continue;
    by_layer[size_t(e.layer)].push_back(e.expert);
    ++picked;
  }
  for (int64_t l = 0; l < bank.num_layers; ++l) {
    auto& ids = by_layer[size_t(l)];
    if (ids.empty()) continue;
    std::vector<std::unique_ptr<std::byte[], AlignedFree>> bufs;
    std::vector<std::byte*> dst;
    for (size_t i = 0; i < ids.size(); ++i) {
      bufs.push_back(allocate_touched(layout.slot_bytes, store::ExpertLayout::kAlign));
      dst.push_back(bufs.back().get());
    }
    std::vector<uint64_t> sums(ids.size());
    src->fetch(m, int(l), ids, dst, sums);
    r.fetched += ids.size();
    if (!quiet) std::fprintf(stderr, "warm: fetched %zu experts of layer %lld\n", ids.size(), (long long)l);
  }
  return r;
}

}  // namespace sluice::fetch
