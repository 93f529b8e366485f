// The run harness: arm parsing, interleaved cold-process runs with device sampling, output checks,
// raw-read floors in the same rotation, per-group summaries and derived ratios.
#include "bench/harness.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/parse_number.h"
#include "format/json_util.h"
#include "bench/cache_floor.h"
#include "store/manifest.h"
#include "store/route_trace.h"

namespace sluice::bench {

namespace fs = std::filesystem;

std::vector<std::string> split_flags(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (char ch : text) {
    if (quote) {
      if (ch == quote)
        quote = 0;
      else
        cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      have = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (quote) fail("arm flags '", text, "': unterminated quote");
  if (have) out.push_back(cur);
  return out;
}

ArmSpec parse_arm(const std::string& spec) {
  size_t colon = spec.find(':');
  ArmSpec a;
  a.name = spec.substr(0, colon);
  if (a.name.empty()) fail("--arm '", spec, "': expected NAME:FLAGS (e.g. base:--no-prefetch, or plain:)");
  for (char ch : a.name)
    if (!(std::isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.'))
      fail("--arm '", spec, "': name '", a.name, "' may hold only letters, digits, '_', '-' and '.'");
  if (colon != std::string::npos) a.flags = split_flags(spec.substr(colon + 1));
  for (const char* taken : {"--binary", "--peer"}) {
    for (size_t i = 0; i < a.flags.size(); ++i) {
      if (a.flags[i] != taken) continue;
      if (i + 1 >= a.flags.size() || a.flags[i + 1].empty())
        fail("--arm '", spec, "': ", taken, " needs ", std::string(taken) == "--binary" ? "a path" : "a command");
      if (std::string(taken) == "--binary")
        a.binary = a.flags[i + 1];
      else
        a.peer = split_flags(a.flags[i + 1]);
      a.flags.erase(a.flags.begin() + long(i), a.flags.begin() + long(i) + 2);
      break;
    }
  }
  if (!a.binary.empty() && !a.peer.empty()) fail("--arm '", spec, "': give --binary or --peer, not both");
  if (!a.peer.empty() && arm_model(a, "").empty())
    fail("--arm '", spec, "': a --peer arm needs its own --model (the peer's model file)");
  for (const auto& f : a.flags)
    for (const char* reserved : {"--json", "--events", "--prompt-ids", "--max-new"})
      if (f == reserved) fail("--arm '", spec, "': ", reserved, " is set by the harness");
  return a;
}

std::string arm_model(const ArmSpec& arm, const std::string& base) {
  for (size_t i = 0; i + 1 < arm.flags.size(); ++i)
    if (arm.flags[i] == "--model") return arm.flags[i + 1];
  for (const auto& f : arm.flags)
    if (f.starts_with("--model=")) return f.substr(8);
  return base;
}

uint64_t model_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    uint64_t n = fs::file_size(path, ec);
    if (ec) fail(path, ": cannot read its size: ", ec.message());
    return n;
  }
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

void parse_memory_limit(const std::string& text, BenchOptions& opt) {
  opt.memory_limit_bytes = 0;
  opt.memory_limit_fraction = 0;
  if (!text.empty() && (text.back() == 'x' || text.back() == 'X')) {
    const std::string num = text.substr(0, text.size() - 1);
    char* end = nullptr;
    double f = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || !(f > 0) || f > 1000)
      fail("--memory-limit ", text, ": a fraction of the model's bytes is a number in (0, 1000] followed by x (0.333x)");
    opt.memory_limit_fraction = f;
    return;
  }
  opt.memory_limit_bytes = parse_byte_size(text, "--memory-limit " + text);
  if (opt.memory_limit_bytes < (16u << 20)) fail("--memory-limit ", text, ": below 16 MiB, no process can start");
}

std::vector<int> rotation(int arms, int rep) {
  std::vector<int> order(size_t(std::max(arms, 0)));
  for (int i = 0; i < arms; ++i) order[size_t(i)] = i;
  if (rep % 2) std::reverse(order.begin(), order.end());
  return order;
}

namespace {

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// The model's manifest, or nullopt when it has none (resident experts).
std::optional<store::Manifest> load_manifest(const std::string& model_dir, const store::ExpertBankFromConfig& expert_bank) {
  const std::string path = store::manifest_path(model_dir);
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(model_dir + "/config.json", std::ios::binary);
  if (!in) fail(model_dir, "/config.json: cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!expert_bank) fail(path, ": reading the manifest needs the model's expert bank (BenchOptions::expert_bank)");
  const store::ExpertBank bank = expert_bank(ss.str(), model_dir + "/config.json");
  return store::read_manifest(path, bank, store::model_identity(ss.str(), bank.layout));
}

struct ModelInfo {
  std::optional<store::Manifest> manifest;
  std::vector<std::string> stat_files;
  std::vector<bool> shared;
  uint64_t memory_limit_bytes = 0;  // each run's cgroup limit (0: none)
};

}  // namespace

BenchResult run_bench(const BenchOptions& opt) {
  if (opt.arms.empty()) fail("bench run: give at least one --arm NAME:FLAGS");
  if (opt.reps < 1) fail("--reps must be at least 1");
  if (opt.max_new.empty()) fail("--max-new is empty");
  auto log = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  fs::create_directories(opt.out_dir + "/runs");
  std::map<std::string, ModelInfo> models;
  std::vector<std::string> model_order;
  for (const auto& a : opt.arms) {
    std::string m = arm_model(a, opt.model);
    if (models.count(m)) continue;
    ModelInfo info;
    info.manifest = load_manifest(m, opt.expert_bank);
    if (info.manifest) {
      std::map<std::string, int> seen;
      for (const auto& h : info.manifest->homes) {
        info.stat_files.push_back(block_stat_file(h.path));
        ++seen[info.stat_files.back()];
      }
      for (const auto& f : info.stat_files) info.shared.push_back(f.empty() || seen[f] > 1);
    }
    // The limit is the model's, fixed for the bench: its files are sized once, not before each run.
    info.memory_limit_bytes = opt.memory_limit_bytes ? opt.memory_limit_bytes
                              : opt.memory_limit_fraction > 0
                                  ? uint64_t(opt.memory_limit_fraction * double(model_bytes(m)))
                                  : 0;
    models[m] = std::move(info);
    model_order.push_back(m);
  }
  // Rotation units: every (arm, length) group, then one raw-read floor per model with a manifest.
  struct Unit {
    int arm = -1, length = -1;
    std::string floor_model;
  };
  std::vector<Unit> units;
  for (int a = 0; a < int(opt.arms.size()); ++a)
    for (int l = 0; l < int(opt.max_new.size()); ++l) units.push_back({a, l, ""});
  if (opt.floor)
    for (const auto& m : model_order)
      if (models[m].manifest) units.push_back({-1, -1, m});

  BenchResult res;
  auto group_name = [&](int a, int l) {
    return opt.max_new.size() > 1 ? cat(opt.arms[size_t(a)].name, "@", opt.max_new[size_t(l)]) : opt.arms[size_t(a)].name;
  };
  for (int a = 0; a < int(opt.arms.size()); ++a)
    for (int l = 0; l < int(opt.max_new.size()); ++l) {
      GroupResult g;
      g.name = group_name(a, l);
      g.arm = opt.arms[size_t(a)].name;
      g.model = arm_model(opt.arms[size_t(a)], opt.model);
      g.max_new = opt.max_new[size_t(l)];
      res.groups.push_back(g);
    }
  int seq = 0;
  const int total = opt.reps * int(units.size());
  for (int rep = 0; rep < opt.reps; ++rep) {
    for (int u : rotation(int(units.size()), rep)) {
      const Unit& unit = units[size_t(u)];
      ++seq;
      if (unit.arm < 0) {
        FloorRecord f;
        f.seq = seq;
        f.rep = rep;
        f.model = unit.floor_model;
        RawReadOptions ro;
        ro.queue_depth = opt.floor_queue_depth;
        ro.seconds = opt.floor_seconds;
        ro.seed = uint64_t(seq);
        f.r = raw_random_reads(manifest_records(*models[f.model].manifest), ro);
        log(cat("[", seq, "/", total, "] floor ", f.model, ": raw O_DIRECT ", f.r.bytes_per_s / 1e6, " MB/s at qd ",
                ro.queue_depth, " per home"));
        res.floors.push_back(f);
        continue;
      }
      const ArmSpec& arm = opt.arms[size_t(unit.arm)];
      RunRecord rec;
      rec.seq = seq;
      rec.rep = rep;
      rec.arm = unit.arm;
      rec.length = unit.length;
      rec.group = group_name(unit.arm, unit.length);
      rec.model = arm_model(arm, opt.model);
      const std::string stem = cat(opt.out_dir, "/runs/", seq, "-", rec.group);
      rec.events_path = stem + ".events.jsonl";
      rec.peer = !arm.peer.empty();
      std::vector<std::string> argv;
      if (rec.peer)
        argv = arm.peer;
      else
        argv = {arm.binary.empty() ? opt.binary : arm.binary, "run"};
      bool own_model = false;  // the arm's --model replaces the bench's (sluice run takes one)
      for (const auto& f : arm.flags) own_model |= f == "--model" || f.starts_with("--model=");
      if (!own_model) argv.insert(argv.end(), {"--model", opt.model});
      argv.insert(argv.end(), {"--prompt-ids", join_ids(opt.prompt), "--max-new", std::to_string(opt.max_new[size_t(unit.length)])});
      if (!rec.peer) argv.push_back("--json");
      argv.insert(argv.end(), {"--events", rec.events_path});
      argv.insert(argv.end(), arm.flags.begin(), arm.flags.end());
      const ModelInfo& info = models[rec.model];
      if (opt.cold) {
        evict_from_page_cache(rec.model);
        if (info.manifest)
          for (const auto& h : info.manifest->homes) evict_from_page_cache(h.path);
      }
      std::optional<MemoryCgroup> cgroup;
      rec.memory_limit_bytes = info.memory_limit_bytes;
      if (rec.memory_limit_bytes) {
        cgroup.emplace(MemoryCgroup::create(cat("sluice-bench-", ::getpid(), "-", seq), rec.memory_limit_bytes));
      }
      bool own_trace = false;
      for (const auto& f : arm.flags) own_trace |= f == "--router-trace" || f.starts_with("--router-trace=");
      if (opt.floor && info.manifest && !own_trace) {
        rec.trace_path = stem + ".trace.jsonl";
        argv.insert(argv.end(), {"--router-trace", rec.trace_path});
      }
      if (info.manifest)
        for (size_t h = 0; h < info.manifest->homes.size(); ++h)
          rec.samples.push_back({info.manifest->homes[h].path, info.stat_files[h], info.shared[h], {}, {}});
      std::vector<uint64_t> base(rec.samples.size());
      for (size_t h = 0; h < rec.samples.size(); ++h) base[h] = block_bytes_read(rec.samples[h].stat_file);
      std::error_code ec;
      fs::remove(rec.events_path, ec);
      rec.proc = run_process(argv, stem + ".stdout", stem + ".stderr", opt.sample_ms, [&](double t) {
        for (size_t h = 0; h < rec.samples.size(); ++h) {
          if (rec.samples[h].stat_file.empty()) continue;
          rec.samples[h].t_s.push_back(t);
          rec.samples[h].bytes.push_back(block_bytes_read(rec.samples[h].stat_file) - base[h]);
        }
      }, cgroup ? cgroup->procs_file() : "");
      if (cgroup) {
        rec.cgroup_peak_bytes = int64_t(cgroup->peak_bytes());
        rec.limit_hits = cgroup->limit_hits();
        rec.oom_killed = cgroup->oom_killed();
        cgroup.reset();
      }
      if (fs::exists(rec.events_path)) {
        rec.m = metrics_from_events(read_events_file(rec.events_path), rec.proc.wall_s);
      } else {
        rec.m.valid = false;
        rec.m.invalid_reason = "no events log";
      }
      if (rec.proc.exit_code != 0 && rec.m.valid) {
        rec.m.valid = false;
        rec.m.invalid_reason = rec.proc.signal ? cat("killed by signal ", rec.proc.signal)
                                               : cat("exit status ", rec.proc.exit_code, " (see ", stem, ".stderr)");
      }
      if (rec.oom_killed) {
        const std::string was = rec.m.valid ? "" : cat(" (", rec.m.invalid_reason, ")");
        rec.m.valid = false;
        rec.m.invalid_reason = cat("killed at its memory limit of ", rec.memory_limit_bytes >> 20, " MiB", was);
      }
      if (opt.expect_text && rec.m.valid && !rec.peer) {
        std::vector<std::string> dargv = {opt.binary, "detokenize", "--model", rec.model, join_ids(rec.m.output)};
        rec.text = capture_output(dargv);
        int64_t n = opt.max_new[size_t(unit.length)];
        bool ok = rec.text == *opt.expect_text ||
                  (opt.expect_text->starts_with(rec.text) && rec.m.generated == n);
        if (!ok) {
          rec.m.valid = false;
          rec.m.invalid_reason = "output text differs from --expect-text";
        }
      }
      log(cat("[", seq, "/", total, "] ", rec.group, " rep ", rep + 1, ": ",
              rec.m.valid ? cat("steady ", rec.m.steady_tps, " tok/s, ttft ", rec.m.ttft_s, " s, wall ", rec.proc.wall_s, " s")
                          : "INVALID: " + rec.m.invalid_reason));
      res.runs.push_back(std::move(rec));
    }
  }
  // Output identity: per length, against the expected ids (cut to that length) or the first valid run.
  // Peers are compared, not checked.
  for (int l = 0; l < int(opt.max_new.size()); ++l) {
    std::vector<RunMetrics*> runs;
    for (auto& r : res.runs)
      if (r.length == l && !r.peer) runs.push_back(&r.m);
    std::vector<int32_t> ref;
    if (opt.expect_ids) {
      std::vector<int32_t> want = *opt.expect_ids;
      if (int64_t(want.size()) > opt.max_new[size_t(l)]) want.resize(size_t(opt.max_new[size_t(l)]));
      ref = check_outputs(runs, &want);
    } else {
      ref = check_outputs(runs, nullptr);
    }
    for (auto& r : res.runs)
      if (r.length == l && r.peer && r.m.valid && !ref.empty()) {
        const Agreement a = agreement(ref, r.m.output);
        r.agree_prefix = int64_t(a.prefix);
        r.agree_share = a.share;
      }
  }
  for (size_t g = 0; g < res.groups.size(); ++g) {
    std::vector<const RunMetrics*> runs;
    for (const auto& r : res.runs)
      if (r.group == res.groups[g].name) runs.push_back(&r.m);
    // Ratios compare like with like: the first arm at the same output length.
    const ArmSummary* base = nullptr;
    for (size_t b = 0; b < g; ++b)
      if (res.groups[b].max_new == res.groups[g].max_new) {
        base = &res.groups[b].summary;
        break;
      }
    res.groups[g].summary = summarize_arm(res.groups[g].name, runs, base);
  }
  derive(opt, res);
  return res;
}

void derive(const BenchOptions& opt, BenchResult& res) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  std::map<std::string, Summary> raw;
  std::map<std::string, uint64_t> record_bytes;
  for (const auto& g : res.groups) {
    std::vector<double> v;
    for (const auto& f : res.floors)
      if (f.model == g.model) v.push_back(f.r.bytes_per_s);
    raw[g.model] = summarize(v);
    if (!record_bytes.count(g.model)) {
      auto m = load_manifest(g.model, opt.expert_bank);
      record_bytes[g.model] = m ? m->layout.slot_bytes : 0;
    }
  }
  for (auto& g : res.groups) {
    const ArmSummary& s = g.summary;
    nlohmann::json d;
    double raw_bw = raw[g.model].median;
    d["raw_read_bytes_per_s"] = to_json(raw[g.model]);
    d["read_bw_over_raw"] = num(ratio(s.decode_read_bytes_per_s.median, raw_bw));
    double decode_s = ratio(1.0, s.steady_tps.median);
    double io_floor = ratio(s.bytes_per_token.median, raw_bw);
    if (std::isfinite(decode_s)) d["decode_s_per_token"] = decode_s;
    d["io_floor_s_per_token"] = num(io_floor);
    double compute_floor = NAN;
    if (!opt.compute_arm.empty())
      for (const auto& c : res.groups)
        if (c.arm == opt.compute_arm && c.max_new == g.max_new) compute_floor = ratio(1.0, c.summary.steady_tps.median);
    d["compute_floor_s_per_token"] = num(compute_floor);
    if (std::isfinite(compute_floor)) {
      double io = std::isfinite(io_floor) ? io_floor : 0.0;
      d["decode_over_max_floor"] = num(ratio(decode_s, std::max(io, compute_floor)));
      d["decode_over_sum_floors"] = num(ratio(decode_s, io + compute_floor));
    }
    // Read-once prefill: only prefill-only runs (one token generated) isolate the prefill pass, whose
    // expert_requests is the union of routed experts summed over layers.
    std::vector<double> pr, union_bytes;
    for (const auto& r : res.runs)
      if (r.group == g.name && r.m.valid && r.m.generated == 1 && record_bytes[g.model] && r.m.expert_requests > 0) {
        double u = double(r.m.expert_requests) * double(record_bytes[g.model]);
        union_bytes.push_back(u);
        pr.push_back(double(r.m.prefill_bytes) / u);
      }
    d["prefill_union_bytes"] = to_json(summarize(union_bytes));
    d["prefill_read_over_union"] = to_json(summarize(pr));
    // Cache floors from each run's own route trace, at its own cache size: the decode bytes per
    // token below which no cache of that size can go (MIN from the best content at the first
    // decode step) and what LRU would read, next to what the run read; MIN of the cold prefill and
    // of the whole run (prefill + decode from a cold cache) next to the run's total reads.
    std::vector<double> min_bpt, lru_bpt, static_bpt, over_min, prefill_min, run_min, run_over_min;
    for (const auto& r : res.runs) {
      if (r.group != g.name || !r.m.valid || r.trace_path.empty() || r.m.cache_slots <= 0 || r.m.prefill_requests < 0 ||
          !record_bytes[g.model] || !fs::exists(r.trace_path))
        continue;
      const store::RouteTrace t = store::read_route_trace(r.trace_path);
      const CacheFloor cf = cache_floor(t.keys, uint64_t(r.m.cache_slots), uint64_t(r.m.prefill_requests));
      const double slot = double(record_bytes[g.model]);
      prefill_min.push_back(double(cf.min_before) * slot);
      run_min.push_back(double(cf.min_all) * slot);
      run_over_min.push_back(ratio(double(r.m.prefill_bytes + r.m.decode_bytes), run_min.back()));
      if (r.m.generated > 1) {
        const double tokens = double(r.m.generated - 1);
        min_bpt.push_back(double(cf.min_after) * slot / tokens);
        lru_bpt.push_back(double(cf.lru_after) * slot / tokens);
        static_bpt.push_back(double(cf.static_after) * slot / tokens);
        over_min.push_back(ratio(r.m.bytes_per_token, min_bpt.back()));
      }
    }
    const Summary min_s = summarize(min_bpt);
    d["min_bytes_per_token"] = to_json(min_s);
    d["lru_bytes_per_token"] = to_json(summarize(lru_bpt));
    d["static_bytes_per_token"] = to_json(summarize(static_bpt));
    d["read_over_min"] = to_json(summarize(over_min));
    d["prefill_min_bytes"] = to_json(summarize(prefill_min));
    d["run_min_bytes"] = to_json(summarize(run_min));
    d["run_read_over_min"] = to_json(summarize(run_over_min));
    d["io_floor_min_s_per_token"] = num(ratio(min_s.median, raw_bw));
    // Memory and storage of the process (wait4), its cgroup's peak and limit, a peer's agreement.
    std::vector<double> rss, stored, peak, hits, prefix, share;
    uint64_t limit = 0;
    for (const auto& r : res.runs) {
      if (r.group != g.name || !r.m.valid) continue;
      if (r.proc.max_rss_bytes >= 0) rss.push_back(double(r.proc.max_rss_bytes));
      if (r.proc.storage_read_bytes >= 0) stored.push_back(double(r.proc.storage_read_bytes));
      if (r.cgroup_peak_bytes >= 0) peak.push_back(double(r.cgroup_peak_bytes));
      if (r.memory_limit_bytes) hits.push_back(double(r.limit_hits));
      if (r.agree_prefix >= 0) prefix.push_back(double(r.agree_prefix));
      if (r.agree_share >= 0) share.push_back(r.agree_share);
      limit = std::max(limit, r.memory_limit_bytes);
    }
    // A GPU host's device tier in decode: how often an expert was in HBM, the share computed on the
    // host's cores, bytes copied into HBM per token; and the prefill's copies.
    std::vector<double> tier_hit, on_host, tier_bpt, tier_prefill;
    for (const auto& r : res.runs) {
      if (r.group != g.name || !r.m.valid || !r.m.gpu_tier) continue;
      if (r.m.decode_tier_requests) {
        tier_hit.push_back(double(r.m.decode_tier_hits) / double(r.m.decode_tier_requests));
        on_host.push_back(double(r.m.decode_on_host) / double(r.m.decode_tier_requests));
      }
      if (r.m.generated > 1) tier_bpt.push_back(double(r.m.decode_tier_bytes) / double(r.m.generated - 1));
      tier_prefill.push_back(double(r.m.prefill_tier_bytes));
    }
    if (!tier_prefill.empty()) {
      d["gpu_tier_decode_hit_rate"] = to_json(summarize(tier_hit));
      d["gpu_tier_decode_on_host_share"] = to_json(summarize(on_host));
      d["gpu_tier_decode_copied_bytes_per_token"] = to_json(summarize(tier_bpt));
      d["gpu_tier_prefill_copied_bytes"] = to_json(summarize(tier_prefill));
    }
    d["max_rss_bytes"] = to_json(summarize(rss));
    d["storage_read_bytes"] = to_json(summarize(stored));
    d["cgroup_peak_bytes"] = to_json(summarize(peak));
    d["memory_limit_hits"] = to_json(summarize(hits));
    if (limit) d["memory_limit_bytes"] = limit;
    bool peer = false;
    for (const auto& a : opt.arms) peer |= a.name == g.arm && !a.peer.empty();
    if (peer) {
      d["peer"] = true;
      d["agree_prefix"] = to_json(summarize(prefix));
      d["agree_share"] = to_json(summarize(share));
    }
    g.derived = d;
  }
}

}  // namespace sluice::bench
