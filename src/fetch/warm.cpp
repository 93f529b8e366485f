// Router trace parsing, warm planning and fetching of the most used missing experts.
#include "fetch/warm.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/arena.h"
#include "core/error.h"
#include "fetch/stream_source.h"
#include "store/manifest.h"
#include "store/route_trace.h"

namespace sluice::fetch {

RouterTrace read_router_trace(const std::string& path) {
  const store::RouteTrace rt = store::read_route_trace(path);
  RouterTrace t;
  t.num_layers = rt.num_layers;
  t.num_experts = rt.num_experts;
  t.requests = rt.requests();
  t.uses.assign(size_t(t.num_layers * t.num_experts), 0);
  for (uint32_t k : rt.keys) t.uses[k] += 1;
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
