// Drive ceilings: record lists per home, the queue-depth sweep (alone, together), and storing the
// result in per-home files and the model's manifest.
#include "bench/drives.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <nlohmann/json.hpp>

#include "bench/raw_read.h"
#include "bench/svg.h"
#include "core/arena.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "format/safetensors.h"
#include "store/manifest.h"

namespace sluice::bench {

namespace fs = std::filesystem;

namespace {

std::string canonical(const std::string& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return ec ? p : c.string();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_probe(const std::string& home, uint64_t bytes) {
  const std::string path = home + "/sluice-drive-probe.bin";
  std::error_code ec;
  if (fs::exists(path) && fs::file_size(path, ec) >= bytes) return;
  PendingFile probe(path, path + ".tmp");
  const size_t chunk = 1 << 20;
  auto buf = allocate_touched(chunk, 4096);
  std::mt19937_64 rng(42);
  auto* words = reinterpret_cast<uint64_t*>(buf.get());
  for (uint64_t done = 0; done < bytes; done += chunk) {
    for (size_t i = 0; i < chunk / 8; ++i) words[i] = rng();  // incompressible: no dedup or compression shortcut
    write_all(probe.fd(), buf.get(), chunk, probe.tmp());
  }
  probe.commit();
}

}  // namespace

nlohmann::json measure_drives(const DriveOptions& opt) {
  if (opt.homes.empty()) fail("bench drives: give at least one --home PATH");
  auto log = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  std::optional<store::Manifest> manifest;
  std::string manifest_file, config_text;
  if (!opt.model.empty()) {
    manifest_file = store::manifest_path(opt.model);
    if (!fs::exists(manifest_file)) fail("--model ", opt.model, ": no expert manifest (", manifest_file, "); run `sluice prepare` first");
    std::ifstream in(opt.model + "/config.json", std::ios::binary);
    if (!in) fail(opt.model, "/config.json: cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    config_text = ss.str();
    if (!opt.expert_bank) fail("--model ", opt.model, ": reading its manifest needs the model's expert bank (DriveOptions::expert_bank)");
    const store::ExpertBank bank = opt.expert_bank(config_text, opt.model + "/config.json");
    manifest = store::read_manifest(manifest_file, bank, store::model_identity(config_text, bank.layout));
  }
  uint64_t record = opt.record_bytes ? opt.record_bytes : manifest ? manifest->layout.slot_bytes : (2u << 20);
  std::vector<std::vector<RecordRef>> records;
  std::vector<int> manifest_home(opt.homes.size(), -1);
  std::vector<std::vector<RecordRef>> by_manifest_home;
  if (manifest) by_manifest_home = manifest_records(*manifest);
  for (size_t i = 0; i < opt.homes.size(); ++i) {
    const std::string& h = opt.homes[i];
    if (manifest)
      for (size_t k = 0; k < manifest->homes.size(); ++k)
        if (canonical(manifest->homes[k].path) == canonical(h)) manifest_home[i] = int(k);
    std::vector<RecordRef> recs;
    // A home not made yet is made here, as prepare would make it (whichever command comes first).
    std::error_code made;
    fs::create_directories(h, made);
    if (made) fail("--home ", h, ": cannot create it: ", made.message());
    if (manifest_home[i] >= 0 && !opt.record_bytes) {
      recs = by_manifest_home[size_t(manifest_home[i])];
    } else {
      if (opt.probe_bytes) write_probe(h, opt.probe_bytes);
      recs = home_file_records(h, record);
    }
    if (recs.size() < 8)
      fail("--home ", h, ": only ", recs.size(), " records of ", record,
           " bytes to read; prepare a model there or pass --probe-mb N to write a probe file");
    records.push_back(std::move(recs));
  }
  nlohmann::json depths = nlohmann::json::array();
  std::vector<std::vector<double>> alone(opt.homes.size()), together(opt.homes.size());
  for (int qd : opt.depths) {
    RawReadOptions ro;
    ro.queue_depth = qd;
    ro.seconds = opt.seconds;
    ro.seed = uint64_t(qd);
    nlohmann::json row = {{"queue_depth", qd}};
    nlohmann::json a = nlohmann::json::array();
    for (size_t i = 0; i < opt.homes.size(); ++i) {
      RawReadResult r = raw_random_reads({records[i]}, ro);
      alone[i].push_back(r.bytes_per_s);
      a.push_back({{"home", opt.homes[i]}, {"bytes_per_s", r.bytes_per_s}, {"mean_ms", r.mean_ms}, {"p99_ms", r.p99_ms},
                   {"reads", r.reads}});
      log(cat("qd ", qd, " home ", opt.homes[i], ": ", r.bytes_per_s / 1e6, " MB/s, mean ", r.mean_ms, " ms, p99 ",
              r.p99_ms, " ms"));
    }
    row["alone"] = a;
    if (opt.homes.size() > 1) {
      RawReadResult r = raw_random_reads(records, ro);
      for (size_t i = 0; i < opt.homes.size(); ++i) together[i].push_back(r.home_bytes_per_s[i]);
      row["together"] = {{"bytes_per_s", r.bytes_per_s}, {"home_bytes_per_s", r.home_bytes_per_s},
                         {"mean_ms", r.mean_ms}, {"p99_ms", r.p99_ms}};
      log(cat("qd ", qd, " all ", opt.homes.size(), " homes together: ", r.bytes_per_s / 1e6, " MB/s"));
    } else {
      together[0].push_back(alone[0].back());
    }
    depths.push_back(row);
  }
  // The stored rate: this home's share when all homes read together (how the engine uses them) at
  // the engine's queue depth (or the nearest measured depth).
  size_t pick = 0;
  for (size_t d = 0; d < opt.depths.size(); ++d)
    if (std::abs(opt.depths[d] - opt.store_queue_depth) < std::abs(opt.depths[pick] - opt.store_queue_depth)) pick = d;
  const std::string when = utc_now();
  nlohmann::json homes = nlohmann::json::array();
  for (size_t i = 0; i < opt.homes.size(); ++i) {
    nlohmann::json by_qd = nlohmann::json::array();
    for (size_t d = 0; d < opt.depths.size(); ++d)
      by_qd.push_back({{"queue_depth", opt.depths[d]}, {"alone_bytes_per_s", alone[i][d]},
                       {"together_bytes_per_s", together[i][d]}});
    nlohmann::json h = {{"format", "sluice-drive"},
                        {"version", 1},
                        {"path", opt.homes[i]},
                        {"measured_at", when},
                        {"record_bytes", record},
                        {"seconds_per_point", opt.seconds},
                        {"homes_measured_together", opt.homes.size()},
                        {"queue_depth_stored", opt.depths[pick]},
                        {"read_bytes_per_s", together[i][pick]},
                        {"ceiling_bytes_per_s", *std::max_element(alone[i].begin(), alone[i].end())},
                        {"by_queue_depth", by_qd}};
    if (opt.write_home_files) write_file_durably(opt.homes[i] + "/sluice-drive.json", h.dump(1) + "\n");
    homes.push_back(h);
  }
  if (manifest) {
    int updated = 0;
    for (size_t i = 0; i < opt.homes.size(); ++i)
      if (manifest_home[i] >= 0) {
        manifest->homes[size_t(manifest_home[i])].read_bytes_per_s = together[i][pick];
        ++updated;
      }
    if (updated) {
      store::write_manifest(*manifest, manifest_file);
      log(cat("updated read_bytes_per_s of ", updated, " home(s) in ", manifest_file));
    }
  }
  return {{"format", "sluice-bench-drives"}, {"version", 1},  {"measured_at", when},
          {"record_bytes", record},          {"depths", depths}, {"homes", homes}};
}

std::string drives_chart_svg(const nlohmann::json& result) {
  Chart c;
  c.title = "O_DIRECT whole-record read bandwidth by queue depth";
  c.x_label = "reads in flight per home";
  c.y_label = "MB/s";
  const auto& homes = result.at("homes");
  for (size_t i = 0; i < homes.size(); ++i) {
    Series s;
    s.name = "home " + std::to_string(i) + " alone";
    for (const auto& p : homes[i].at("by_queue_depth")) {
      s.x.push_back(p.at("queue_depth").get<double>());
      s.y.push_back(p.at("alone_bytes_per_s").get<double>() / 1e6);
    }
    c.series.push_back(s);
  }
  if (homes.size() > 1) {
    Series s;
    s.name = "all together";
    for (const auto& row : result.at("depths")) {
      s.x.push_back(row.at("queue_depth").get<double>());
      s.y.push_back(row.at("together").at("bytes_per_s").get<double>() / 1e6);
    }
    c.series.push_back(s);
  }
  return line_chart_svg(c);
}

}  // namespace sluice::bench
