// Per-run metrics from event logs, output checks and per-arm summaries.
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double num_or(const nlohmann::json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::vector<int32_t> ids_of(const nlohmann::json& j, const char* key, const std::string& where) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (!it->is_array()) fail(where, ": ", key, " is not an array");
  for (const auto& v : *it) {
    if (!v.is_number_integer()) fail(where, ": ", key, " holds a non-integer");
    out.push_back(v.get<int32_t>());
  }
  return out;
}

}  // namespace

Summary summarize(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  Summary s;
  s.n = int(values.size());
  if (values.empty()) {
    s.median = s.min = s.max = s.mean = kNaN;
    return s;
  }
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  s.min = values.front();
  s.max = values.back();
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / double(n);
  return s;
}

double ratio(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b) || b == 0) return kNaN;
  return a / b;
}

std::vector<nlohmann::json> read_events_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open events log");
  std::vector<nlohmann::json> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    out.push_back(format::parse_json_text(line, cat(path, ": line ", n)));
  }
  return out;
}

RunMetrics metrics_from_events(const std::vector<nlohmann::json>& events, double wall_s) {
  RunMetrics r;
  r.wall_s = wall_s;
  auto invalid = [&](const std::string& why) {
    if (r.valid) r.invalid_reason = why;
    r.valid = false;
  };
  const nlohmann::json* end = nullptr;
  bool have_first = false;
  double t = 0;
  int64_t emitted = 0;
  for (const auto& e : events) {
    std::string kind = e.value("event", "");
    if (kind == "run_start") {
      r.prompt = ids_of(e, "prompt_ids", "run_start");
    } else if (kind == "prefill_done" || kind == "decode_step") {
      double ms = num_or(e, "duration_ms", kNaN);
      if (!std::isfinite(ms) || ms < 0) {
        invalid(cat(kind, " without a valid duration_ms"));
        continue;
      }
      // t_ms (engine clock since run start) when the log has it; else the running sum of durations.
      double at = num_or(e, "t_ms", kNaN);
      t = std::isfinite(at) ? at / 1000.0 : t + ms / 1000.0;
      auto em = ids_of(e, "emitted", kind);
      int64_t prop = int64_t(num_or(e, "proposed", 0)), acc = int64_t(num_or(e, "accepted", 0));
      uint64_t bytes = uint64_t(num_or(e, "expert_bytes_read", 0));
      const auto tier = e.find("gpu_tier");
      const bool has_tier = tier != e.end() && tier->is_object();
      r.gpu_tier = r.gpu_tier || has_tier;
      auto tier_count = [&](const char* name) { return has_tier ? uint64_t(num_or(*tier, name, 0)) : uint64_t(0); };
      if (kind == "prefill_done") {
        if (have_first) invalid("two prefill_done events");
        have_first = true;
        r.ttft_s = t;
        r.prefill_bytes += bytes;
        r.prefill_tier_bytes += tier_count("bytes_copied");
        r.prefill_requests = int64_t(num_or(e, "expert_requests", -1));
      } else {
        if (!have_first) invalid("decode_step before prefill_done");
        if (int64_t(em.size()) > acc + 1) invalid(cat("decode_step emitted ", em.size(), " tokens with ", acc, " accepted"));
        if (acc > prop) invalid(cat("decode_step accepted ", acc, " of ", prop, " proposed"));
        r.decode_bytes += bytes;
        r.decode_tier_requests += tier_count("requests");
        r.decode_tier_hits += tier_count("hits");
        r.decode_on_host += tier_count("on_host");
        r.decode_tier_bytes += tier_count("bytes_copied");
        r.proposed += prop;
        r.accepted += acc;
      }
      emitted += int64_t(em.size());
      r.step_end_s.push_back(t);
      r.step_bytes.push_back(bytes);
    } else if (kind == "run_end") {
      end = &e;
    }
  }
  if (!end) {
    invalid("no run_end event (the run did not finish)");
    return r;
  }
  if (end->value("status", "") != "ok") invalid(cat("run_end status ", end->value("status", "?")));
  r.output = ids_of(*end, "completion_ids", "run_end");
  r.stop_reason = end->value("stop_reason", "");
  r.generated = int64_t(r.output.size());
  if (!have_first) invalid("no prefill_done event");
  if (emitted < r.generated || emitted > r.generated + 1)
    invalid(cat("events emitted ", emitted, " tokens but run_end lists ", r.generated));
  r.decode_s = t - r.ttft_s;
  r.steady_tps = r.generated > 1 && r.decode_s > 0 ? double(r.generated - 1) / r.decode_s : kNaN;
  r.inclusive_tps = wall_s > 0 ? double(r.generated) / wall_s : kNaN;
  r.load_s = wall_s - num_or(*end, "wall_ms", 0) / 1000.0;
  r.acceptance = r.proposed > 0 ? double(r.accepted) / double(r.proposed) : kNaN;
  r.bytes_per_token = r.generated > 1 ? double(r.decode_bytes) / double(r.generated - 1) : kNaN;
  r.decode_read_bytes_per_s = r.decode_s > 0 ? double(r.decode_bytes) / r.decode_s : kNaN;
  r.hit_rate = r.prefetch_recall = kNaN;
  auto st = end->find("stats");
  if (st != end->end() && st->is_object()) {
    r.expert_requests = int64_t(num_or(*st, "expert_requests", 0));
    auto store = st->find("store");
    if (store != st->end() && store->is_object()) {
      r.hit_rate = num_or(*store, "hit_rate", kNaN);
      r.prefetch_recall = num_or(*store, "prefetch_recall", kNaN);
      r.cache_slots = int64_t(num_or(*store, "cache_slots", 0));
      auto homes = store->find("homes");
      double engine_s = t;
      if (homes != store->end() && homes->is_array())
        for (const auto& h : *homes) {
          HomeRun hr;
          hr.path = h.value("path", "");
          hr.reads = uint64_t(num_or(h, "reads", 0));
          hr.bytes = uint64_t(num_or(h, "bytes", 0));
          hr.mean_ms = num_or(h, "mean_ms", kNaN);
          hr.p99_ms = num_or(h, "p99_ms", kNaN);
          hr.bytes_per_s = engine_s > 0 ? double(hr.bytes) / engine_s : kNaN;
          r.homes.push_back(hr);
        }
    }
  }
  return r;
}

Agreement agreement(const std::vector<int32_t>& ref, const std::vector<int32_t>& got) {
  Agreement a;
  while (a.prefix < ref.size() && a.prefix < got.size() && ref[a.prefix] == got[a.prefix]) ++a.prefix;
  const size_t n = std::max(ref.size(), got.size());
  size_t same = 0;
  for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i) same += ref[i] == got[i];
  a.share = n ? double(same) / double(n) : 1.0;
  return a;
}

std::vector<int32_t> check_outputs(std::vector<RunMetrics*>& runs, const std::vector<int32_t>* expected) {
  std::vector<int32_t> ref;
  bool have = false;
  if (expected) {
    ref = *expected;
    have = true;
  }
  for (RunMetrics* r : runs) {
    if (!r->valid) continue;
    if (!have) {
      ref = r->output;
      have = true;
      continue;
    }
    if (r->output != ref) {
      size_t i = 0;
      while (i < ref.size() && i < r->output.size() && ref[i] == r->output[i]) ++i;
      r->valid = false;
      r->invalid_reason = cat("output differs from the ", expected ? "expectation" : "first valid run",
                              " at token ", i, " (", r->output.size(), " vs ", ref.size(), " tokens)");
    }
  }
  return ref;
}

ArmSummary summarize_arm(const std::string& name, const std::vector<const RunMetrics*>& runs,
                         const ArmSummary* baseline) {
  ArmSummary a;
  a.name = name;
  a.runs = int(runs.size());
  std::vector<double> ttft, steady, incl, acc, bpt, dbw, hit, recall, pre, wall;
  std::vector<std::vector<double>> home_bw;
  for (const RunMetrics* r : runs) {
    if (!r->valid) continue;
    ++a.valid;
    ttft.push_back(r->ttft_s);
    steady.push_back(r->steady_tps);
    incl.push_back(r->inclusive_tps);
    acc.push_back(r->acceptance);
    bpt.push_back(r->bytes_per_token);
    dbw.push_back(r->decode_read_bytes_per_s);
    hit.push_back(r->hit_rate);
    recall.push_back(r->prefetch_recall);
    pre.push_back(double(r->prefill_bytes));
    wall.push_back(r->wall_s);
    for (size_t h = 0; h < r->homes.size(); ++h) {
      if (home_bw.size() <= h) {
        home_bw.resize(h + 1);
        a.home_paths.push_back(r->homes[h].path);
      }
      home_bw[h].push_back(r->homes[h].bytes_per_s);
    }
  }
  a.ttft_s = summarize(ttft);
  a.steady_tps = summarize(steady);
  a.inclusive_tps = summarize(incl);
  a.acceptance = summarize(acc);
  a.bytes_per_token = summarize(bpt);
  a.decode_read_bytes_per_s = summarize(dbw);
  a.hit_rate = summarize(hit);
  a.prefetch_recall = summarize(recall);
  a.prefill_bytes = summarize(pre);
  a.wall_s = summarize(wall);
  for (auto& v : home_bw) a.home_bytes_per_s.push_back(summarize(v));
  const ArmSummary& base = baseline ? *baseline : a;
  a.steady_ratio = ratio(a.steady_tps.median, base.steady_tps.median);
  a.inclusive_ratio = ratio(a.inclusive_tps.median, base.inclusive_tps.median);
  a.ttft_ratio = ratio(a.ttft_s.median, base.ttft_s.median);
  return a;
}

namespace {
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
}  // namespace

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n}, {"median", num(s.median)}, {"min", num(s.min)}, {"max", num(s.max)}, {"mean", num(s.mean)}};
}

nlohmann::json to_json(const RunMetrics& r) {
  nlohmann::json homes = nlohmann::json::array();
  for (const auto& h : r.homes)
    homes.push_back({{"path", h.path}, {"reads", h.reads}, {"bytes", h.bytes}, {"mean_ms", num(h.mean_ms)},
                     {"p99_ms", num(h.p99_ms)}, {"bytes_per_s", num(h.bytes_per_s)}});
  return {{"valid", r.valid},
          {"invalid_reason", r.invalid_reason},
          {"generated", r.generated},
          {"stop_reason", r.stop_reason},
          {"output", r.output},
          {"wall_s", num(r.wall_s)},
          {"load_s", num(r.load_s)},
          {"ttft_s", num(r.ttft_s)},
          {"decode_s", num(r.decode_s)},
          {"steady_tps", num(r.steady_tps)},
          {"inclusive_tps", num(r.inclusive_tps)},
          {"proposed", r.proposed},
          {"accepted", r.accepted},
          {"acceptance", num(r.acceptance)},
          {"prefill_bytes", r.prefill_bytes},
          {"decode_bytes", r.decode_bytes},
          {"bytes_per_token", num(r.bytes_per_token)},
          {"decode_read_bytes_per_s", num(r.decode_read_bytes_per_s)},
          {"hit_rate", num(r.hit_rate)},
          {"prefetch_recall", num(r.prefetch_recall)},
          {"expert_requests", r.expert_requests},
          {"homes", homes}};
}

nlohmann::json to_json(const ArmSummary& a) {
  nlohmann::json homes = nlohmann::json::array();
  for (size_t h = 0; h < a.home_paths.size(); ++h)
    homes.push_back({{"path", a.home_paths[h]}, {"bytes_per_s", to_json(a.home_bytes_per_s[h])}});
  return {{"name", a.name},
          {"runs", a.runs},
          {"valid", a.valid},
          {"ttft_s", to_json(a.ttft_s)},
          {"steady_tps", to_json(a.steady_tps)},
          {"inclusive_tps", to_json(a.inclusive_tps)},
          {"acceptance", to_json(a.acceptance)},
          {"bytes_per_token", to_json(a.bytes_per_token)},
          {"decode_read_bytes_per_s", to_json(a.decode_read_bytes_per_s)},
          {"hit_rate", to_json(a.hit_rate)},
          {"prefetch_recall", to_json(a.prefetch_recall)},
          {"prefill_bytes", to_json(a.prefill_bytes)},
          {"wall_s", to_json(a.wall_s)},
          {"homes", homes},
          {"steady_ratio", num(a.steady_ratio)},
          {"inclusive_ratio", num(a.inclusive_ratio)},
          {"ttft_ratio", num(a.ttft_ratio)}};
}

}  // namespace sluice::bench
