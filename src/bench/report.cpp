// CSV, JSON and Markdown writers and the chart builders of a bench run.
#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/svg.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "format/safetensors.h"

namespace sluice::bench {
namespace {

std::string f(double v, int digits = 4) {
  if (!std::isfinite(v)) return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return o + "\"";
}

double jnum(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}
// The median of a summary field of j (NaN when absent).
double jmedian(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? jnum(*it, "median") : NAN;
}

std::string mmm(const Summary& s, double scale = 1, int digits = 4) {
  if (s.n == 0) return "";
  return f(s.median * scale, digits) + " (" + f(s.min * scale, digits) + "–" + f(s.max * scale, digits) + ")";
}

}  // namespace

Chart bandwidth_timeline(const RunRecord& run, double window_s) {
  Chart c;
  c.title = "Expert read bandwidth over time: " + run.group + " (run " + std::to_string(run.seq) + ")";
  c.x_label = "seconds since process launch";
  c.y_label = "MB/s";
  bool per_device = !run.samples.empty();
  for (const auto& h : run.samples)
    if (h.stat_file.empty() || h.shared_device) per_device = false;
  if (per_device) {
    for (size_t i = 0; i < run.samples.size(); ++i) {
      const auto& h = run.samples[i];
      Series s;
      s.name = "home " + std::to_string(i) + " (device)";
      size_t from = 0;
      for (size_t k = 1; k < h.t_s.size(); ++k) {
        double dt = h.t_s[k] - h.t_s[from];
        if (dt < window_s && k + 1 < h.t_s.size()) continue;
        if (dt <= 0) continue;
        s.x.push_back(0.5 * (h.t_s[k] + h.t_s[from]));
        s.y.push_back(double(h.bytes[k] - h.bytes[from]) / dt / 1e6);
        from = k;
      }
      c.series.push_back(s);
    }
  }
  // Engine total from the events (steps on the engine clock, shifted to the launch clock).
  Series total;
  total.name = per_device ? "engine total" : "engine total (homes share a device)";
  double offset = run.m.load_s;
  double t_prev = 0, acc_t = 0;
  uint64_t acc_b = 0;
  for (size_t k = 0; k < run.m.step_end_s.size(); ++k) {
    acc_b += run.m.step_bytes[k];
    acc_t = run.m.step_end_s[k];
    if (acc_t - t_prev < window_s && k + 1 < run.m.step_end_s.size()) continue;
    if (acc_t > t_prev) {
      total.x.push_back(offset + 0.5 * (acc_t + t_prev));
      total.y.push_back(double(acc_b) / (acc_t - t_prev) / 1e6);
    }
    t_prev = acc_t;
    acc_b = 0;
  }
  c.series.push_back(total);
  return c;
}

std::string markdown_table(const BenchResult& res) {
  std::ostringstream o;
  o << "| arm | valid/runs | steady tok/s med (min–max) | × first | inclusive tok/s | × first | TTFT s | "
       "acceptance | expert MB/token | MIN MB/token | read/MIN | fixed-best MB/token | run read/MIN | hit rate | prefetch recall | decode read MB/s | read/raw | "
       "decode/max(floors) | decode/sum(floors) | prefill read/union |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : res.groups) {
    const ArmSummary& s = g.summary;
    const auto& d = g.derived;
    double pr = NAN;
    if (d.contains("prefill_read_over_union")) pr = jnum(d["prefill_read_over_union"], "median");
    o << "| " << g.name << " | " << s.valid << "/" << s.runs << " | " << mmm(s.steady_tps) << " | "
      << f(s.steady_ratio, 3) << " | " << mmm(s.inclusive_tps) << " | " << f(s.inclusive_ratio, 3) << " | "
      << mmm(s.ttft_s) << " | " << f(s.acceptance.median, 3) << " | " << f(s.bytes_per_token.median / 1e6, 4)
      << " | " << f(jmedian(d, "min_bytes_per_token") / 1e6, 4) << " | " << f(jmedian(d, "read_over_min"), 3)
      << " | " << f(jmedian(d, "static_bytes_per_token") / 1e6, 4) << " | " << f(jmedian(d, "run_read_over_min"), 3) << " | " << f(s.hit_rate.median, 3) << " | " << f(s.prefetch_recall.median, 3) << " | "
      << f(s.decode_read_bytes_per_s.median / 1e6, 4) << " | " << f(jnum(d, "read_bw_over_raw"), 3) << " | "
      << f(jnum(d, "decode_over_max_floor"), 3) << " | " << f(jnum(d, "decode_over_sum_floors"), 3) << " | "
      << f(pr, 4) << " |\n";
  }
  return o.str();
}

std::vector<std::string> write_reports(const BenchOptions& opt, const BenchResult& res) {
  std::vector<std::string> written;
  const std::string& dir = opt.out_dir;
  // results.json
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : opt.arms) arms.push_back({{"name", a.name}, {"flags", a.flags}});
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : res.runs) {
    nlohmann::json j = to_json(r.m);
    j["seq"] = r.seq;
    j["rep"] = r.rep;
    j["group"] = r.group;
    j["model"] = r.model;
    j["events"] = r.events_path;
    j["exit_code"] = r.proc.exit_code;
    j["max_rss_bytes"] = r.proc.max_rss_bytes;
    j["storage_read_bytes"] = r.proc.storage_read_bytes;
    if (r.memory_limit_bytes) {
      j["memory_limit_bytes"] = r.memory_limit_bytes;
      j["cgroup_peak_bytes"] = r.cgroup_peak_bytes;
      j["memory_limit_hits"] = r.limit_hits;
      j["oom_killed"] = r.oom_killed;
    }
    if (r.peer) {
      j["peer"] = true;
      j["agree_prefix"] = r.agree_prefix;
      j["agree_share"] = r.agree_share;
    }
    if (!r.text.empty()) j["text"] = r.text;
    runs.push_back(j);
  }
  nlohmann::json floors = nlohmann::json::array();
  for (const auto& fl : res.floors)
    floors.push_back({{"seq", fl.seq}, {"rep", fl.rep}, {"model", fl.model}, {"queue_depth", fl.r.queue_depth},
                      {"seconds", fl.r.seconds}, {"bytes", fl.r.bytes}, {"reads", fl.r.reads},
                      {"bytes_per_s", fl.r.bytes_per_s}, {"mean_ms", fl.r.mean_ms}, {"p99_ms", fl.r.p99_ms},
                      {"home_bytes_per_s", fl.r.home_bytes_per_s}});
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : res.groups) {
    nlohmann::json j = to_json(g.summary);
    j["arm"] = g.arm;
    j["model"] = g.model;
    j["max_new"] = g.max_new;
    j["derived"] = g.derived;
    groups.push_back(j);
  }
  nlohmann::json all = {{"format", "sluice-bench-run"}, {"version", 1},        {"model", opt.model},
                        {"prompt_ids", opt.prompt},     {"max_new", opt.max_new}, {"reps", opt.reps},
                        {"arms", arms},                 {"compute_arm", opt.compute_arm},
                        {"runs", runs},                 {"floors", floors},     {"groups", groups}};
  if (opt.expect_ids) all["expect_ids"] = *opt.expect_ids;
  if (opt.expect_text) all["expect_text"] = *opt.expect_text;
  write_file_durably(dir + "/results.json", all.dump(1) + "\n");
  written.push_back(dir + "/results.json");

  // runs.csv
  std::ostringstream rc;
  rc << "seq,rep,group,valid,invalid_reason,generated,wall_s,load_s,ttft_s,decode_s,steady_tps,inclusive_tps,proposed,"
        "accepted,prefill_bytes,decode_bytes,bytes_per_token,decode_read_bytes_per_s,hit_rate,prefetch_recall,"
        "expert_requests\n";
  for (const auto& r : res.runs) {
    const auto& m = r.m;
    rc << r.seq << ',' << r.rep << ',' << csv_field(r.group) << ',' << (m.valid ? 1 : 0) << ','
       << csv_field(m.invalid_reason) << ',' << m.generated << ',' << f(m.wall_s, 6) << ',' << f(m.load_s, 6) << ','
       << f(m.ttft_s, 6) << ',' << f(m.decode_s, 6) << ',' << f(m.steady_tps, 6) << ',' << f(m.inclusive_tps, 6)
       << ',' << m.proposed << ',' << m.accepted << ',' << m.prefill_bytes << ',' << m.decode_bytes << ','
       << f(m.bytes_per_token, 8) << ',' << f(m.decode_read_bytes_per_s, 6) << ',' << f(m.hit_rate, 6) << ','
       << f(m.prefetch_recall, 6) << ',' << m.expert_requests << '\n';
  }
  write_file_durably(dir + "/runs.csv", rc.str());
  written.push_back(dir + "/runs.csv");

  // summary.csv
  std::ostringstream sc;
  sc << "group,max_new,valid,runs,steady_median,steady_min,steady_max,steady_ratio,inclusive_median,inclusive_min,"
        "inclusive_max,inclusive_ratio,ttft_median,ttft_min,ttft_max,acceptance_median,bytes_per_token_median,"
        "hit_rate_median,prefetch_recall_median,decode_read_bytes_per_s_median,raw_read_bytes_per_s_median,"
        "read_bw_over_raw,io_floor_s_per_token,compute_floor_s_per_token,decode_over_max_floor,"
        "decode_over_sum_floors,prefill_read_over_union,min_bytes_per_token_median,lru_bytes_per_token_median,"
        "read_over_min_median,io_floor_min_s_per_token,prefill_min_bytes_median,run_min_bytes_median,"
        "run_read_over_min_median,static_bytes_per_token_median\n";
  for (const auto& g : res.groups) {
    const auto& s = g.summary;
    const auto& d = g.derived;
    sc << csv_field(g.name) << ',' << g.max_new << ',' << s.valid << ',' << s.runs << ',' << f(s.steady_tps.median, 6)
       << ',' << f(s.steady_tps.min, 6) << ',' << f(s.steady_tps.max, 6) << ',' << f(s.steady_ratio, 6) << ','
       << f(s.inclusive_tps.median, 6) << ',' << f(s.inclusive_tps.min, 6) << ',' << f(s.inclusive_tps.max, 6) << ','
       << f(s.inclusive_ratio, 6) << ',' << f(s.ttft_s.median, 6) << ',' << f(s.ttft_s.min, 6) << ','
       << f(s.ttft_s.max, 6) << ',' << f(s.acceptance.median, 6) << ',' << f(s.bytes_per_token.median, 8) << ','
       << f(s.hit_rate.median, 6) << ',' << f(s.prefetch_recall.median, 6) << ','
       << f(s.decode_read_bytes_per_s.median, 6) << ',' << f(jnum(d["raw_read_bytes_per_s"], "median"), 6) << ','
       << f(jnum(d, "read_bw_over_raw"), 6) << ',' << f(jnum(d, "io_floor_s_per_token"), 6) << ','
       << f(jnum(d, "compute_floor_s_per_token"), 6) << ',' << f(jnum(d, "decode_over_max_floor"), 6) << ','
       << f(jnum(d, "decode_over_sum_floors"), 6) << ',' << f(jnum(d["prefill_read_over_union"], "median"), 6) << ','
       << f(jmedian(d, "min_bytes_per_token"), 8) << ',' << f(jmedian(d, "lru_bytes_per_token"), 8) << ','
       << f(jmedian(d, "read_over_min"), 6) << ',' << f(jnum(d, "io_floor_min_s_per_token"), 6) << ','
       << f(jmedian(d, "prefill_min_bytes"), 2) << ',' << f(jmedian(d, "run_min_bytes"), 2) << ','
       << f(jmedian(d, "run_read_over_min"), 6) << ',' << f(jmedian(d, "static_bytes_per_token"), 8) << '\n';
  }
  write_file_durably(dir + "/summary.csv", sc.str());
  written.push_back(dir + "/summary.csv");

  // results.md
  std::ostringstream md;
  md << "# sluice bench run\n\nModel `" << opt.model << "`, prompt of " << opt.prompt.size() << " tokens, "
     << opt.reps << " reps, arms interleaved A B B A. Ratios (× first) are to the first arm at the same length.\n\n"
     << markdown_table(res);
  md << "\nMemory and storage per run (medians over valid runs): peak resident set and bytes read from "
        "storage (wait4), the cgroup's peak of memory + page cache and its limit"
     << (opt.cold ? "; page cache of each run's model files dropped before it" : "")
     << ". Peers: tokens equal to the reference before the first difference, and the share of positions "
        "with the same token.\n\n"
     << "| arm | peak RSS MB | storage read MB | cgroup peak MB | limit MB | limit hits | peer: same prefix | "
        "peer: same-position share |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : res.groups) {
    const auto& d = g.derived;
    const bool peer = d.contains("peer");
    md << "| " << g.name << " | " << f(jmedian(d, "max_rss_bytes") / 1e6, 4) << " | "
       << f(jmedian(d, "storage_read_bytes") / 1e6, 4) << " | " << f(jmedian(d, "cgroup_peak_bytes") / 1e6, 4) << " | "
       << (d.contains("memory_limit_bytes") ? f(d["memory_limit_bytes"].get<double>() / 1e6, 4) : std::string("–"))
       << " | " << f(jmedian(d, "memory_limit_hits"), 3) << " | " << (peer ? f(jmedian(d, "agree_prefix"), 4) : "–")
       << " | " << (peer ? f(jmedian(d, "agree_share"), 3) : "–") << " |\n";
  }
  int invalid = 0;
  for (const auto& r : res.runs)
    if (!r.m.valid) ++invalid;
  if (invalid) {
    md << "\nInvalid runs (excluded):\n\n";
    for (const auto& r : res.runs)
      if (!r.m.valid) md << "- run " << r.seq << " (" << r.group << "): " << r.m.invalid_reason << "\n";
  }
  bool any_homes = false;
  for (const auto& g : res.groups) any_homes |= !g.summary.home_paths.empty();
  if (any_homes) {
    md << "\nPer-home engine read bandwidth (home bytes / engine time, median MB/s over valid runs):\n\n"
       << "| arm | home | MB/s med (min–max) |\n|---|---|---|\n";
    for (const auto& g : res.groups)
      for (size_t h = 0; h < g.summary.home_paths.size(); ++h)
        md << "| " << g.name << " | " << g.summary.home_paths[h] << " | " << mmm(g.summary.home_bytes_per_s[h], 1e-6)
           << " |\n";
  }
  if (!res.floors.empty()) {
    md << "\nRaw O_DIRECT floor (same expert records, same rotation):\n\n| seq | model | qd/home | MB/s | mean ms | p99 ms |\n|---|---|---|---|---|---|\n";
    for (const auto& fl : res.floors)
      md << "| " << fl.seq << " | " << fl.model << " | " << fl.r.queue_depth << " | " << f(fl.r.bytes_per_s / 1e6, 5)
         << " | " << f(fl.r.mean_ms, 4) << " | " << f(fl.r.p99_ms, 4) << " |\n";
  }
  write_file_durably(dir + "/results.md", md.str());
  written.push_back(dir + "/results.md");

  // Charts: a bandwidth timeline per group (its first valid run), steady/inclusive by arm, by length,
  // and prefill bytes against the union floor.
  auto chart = [&](const std::string& name, const std::string& svg) {
    written.push_back(dir + "/" + name);
    std::string png = write_chart(dir + "/" + name, svg);
    if (!png.empty()) written.push_back(png);
  };
  for (const auto& g : res.groups)
    for (const auto& r : res.runs)
      if (r.group == g.name && r.m.valid) {
        std::string safe = g.name;
        for (char& ch : safe)
          if (ch == '@') ch = '_';
        chart("bandwidth-" + safe + ".svg", line_chart_svg(bandwidth_timeline(r, 0.25)));
        break;
      }
  Chart bars;
  bars.title = "Steady decode tok/s by arm (median of valid runs)";
  bars.y_label = "tok/s";
  for (size_t l = 0; l < opt.max_new.size(); ++l) {
    Series s;
    s.name = cat(opt.max_new[l], " tokens");
    for (const auto& a : opt.arms) {
      if (l == 0) bars.categories.push_back(a.name);
      for (const auto& g : res.groups)
        if (g.arm == a.name && g.max_new == opt.max_new[l]) s.y.push_back(g.summary.steady_tps.median);
    }
    bars.series.push_back(s);
  }
  chart("steady-by-arm.svg", bar_chart_svg(bars));
  if (opt.max_new.size() > 1) {
    Chart lines;
    lines.title = "Steady decode tok/s by output length";
    lines.x_label = "tokens generated";
    lines.y_label = "tok/s";
    for (const auto& a : opt.arms) {
      Series s;
      s.name = a.name;
      for (const auto& g : res.groups)
        if (g.arm == a.name) {
          s.x.push_back(double(g.max_new));
          s.y.push_back(g.summary.steady_tps.median);
        }
      lines.series.push_back(s);
    }
    chart("steady-by-length.svg", line_chart_svg(lines));
  }
  // Speed and raw floor relative to the first arm (drive-count ladders: do arms scale with their
  // drives' bandwidth?), at the first length.
  if (!res.floors.empty()) {
    Chart rel;
    rel.title = "Relative to the first arm: steady decode vs raw read floor";
    rel.y_label = "x first arm";
    rel.reference = 1;
    rel.reference_label = "first arm";
    Series speed{"steady tok/s", {}, {}}, floor{"raw floor MB/s", {}, {}}, incl{"inclusive tok/s", {}, {}};
    double base_floor = NAN;
    for (const auto& g : res.groups) {
      if (g.max_new != opt.max_new[0]) continue;
      double fl = jnum(g.derived["raw_read_bytes_per_s"], "median");
      if (std::isnan(base_floor)) base_floor = fl;
      rel.categories.push_back(g.arm);
      speed.y.push_back(g.summary.steady_ratio);
      incl.y.push_back(g.summary.inclusive_ratio);
      floor.y.push_back(fl / base_floor);
    }
    rel.series = {speed, incl, floor};
    chart("relative.svg", bar_chart_svg(rel));
  }
  Chart pre;
  pre.title = "Prefill expert bytes read vs the routed-expert union of each pass";
  pre.y_label = "MB";
  Series read{"bytes read", {}, {}}, uni{"union per pass", {}, {}};
  for (const auto& g : res.groups) {
    double u = jnum(g.derived["prefill_union_bytes"], "median");
    if (!std::isfinite(u)) continue;
    pre.categories.push_back(g.name);
    read.y.push_back(g.summary.prefill_bytes.median / 1e6);
    uni.y.push_back(u / 1e6);
  }
  if (!pre.categories.empty()) {
    pre.series = {read, uni};
    chart("prefill-bytes.svg", bar_chart_svg(pre));
  }
  return written;
}

}  // namespace sluice::bench
