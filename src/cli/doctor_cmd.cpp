// `sluice doctor [--model DIR] [--home PATH...] [--cache-gb G] [--json]`: this machine as a streamed
// model sees it (CPU and ISAs, memory, drives, GPUs; each given or detected home with O_DIRECT,
// io_uring and a short timed read rate) and, for a model, what fits where: resident bytes, the
// expert bank, a suggested --cache-gb for this RAM, the prepared homes, and the I/O floor per token
// from the measured rates; then plain warnings.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/model_facts.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "device/device.h"
#include "model/registry.h"
#include "store/hybrid_plan.h"
#include "store/manifest.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct DoctorOptions {
  std::string model;
  std::vector<std::string> homes;
  double cache_gb = 0;  // 0: not given
  double seconds = 0.5;
  bool json = false;
};

// Every accelerator's devices in its chosen kernel set ("cuda:0", not "cuda-ref:0"), with memory.
json gpus_json() {
  json out = json::array();
  std::vector<std::string> prefixes;
  for (const device::DeviceBackend& b : device::device_backends())
    if (b.accelerator && !b.chosen.empty()) prefixes.push_back(b.chosen + ":");
  for (const std::string& name : device::available_devices()) {
    bool accelerator = false;
    for (const std::string& p : prefixes) accelerator = accelerator || name.rfind(p, 0) == 0;
    if (!accelerator) continue;
    try {
      auto d = device::open_device(name);
      const device::Device::MemoryInfo m = d->memory();
      out.push_back({{"device", name}, {"name", d->name()}, {"free_bytes", m.free}, {"total_bytes", m.total}});
    } catch (const std::exception& e) {
      out.push_back({{"device", name}, {"error", e.what()}});
    }
  }
  return out;
}

json probe_json(const bench::DirProbe& p, const std::string& role) {
  return {{"path", p.path},          {"role", role},
          {"exists", p.exists},      {"filesystem", p.filesystem},
          {"device", p.device},      {"free_bytes", p.free_bytes},
          {"total_bytes", p.total_bytes}, {"o_direct", p.o_direct},
          {"o_direct_note", p.o_direct_note}, {"io_uring", p.io_uring},
          {"io_uring_note", p.io_uring_note}, {"read_bytes_per_s", p.read_bytes_per_s},
          {"read_bytes", p.read_bytes},  {"read_engine", p.read_engine},
          {"read_note", p.read_note}};
}

// What fits where for the model, from its facts, this machine's memory and the probed homes.
json model_advice(const json& facts, const bench::MemoryFacts& mem, const json& dirs, const json& gpus,
                  const DoctorOptions& o, json& warnings) {
  const double resident = facts["resident_bytes"].get<double>();
  const double available = double(mem.available);
  json a = {{"resident_bytes", resident}, {"resident_fits_ram", resident < available}};
  if (resident >= available)
    warnings.push_back("the resident weights (" + human_bytes(resident) + ") do not fit in available RAM (" +
                       human_bytes(available) + ")");
  for (const json& g : gpus)
    if (g.contains("total_bytes"))
      a["resident_fits_" + g["device"].get<std::string>()] = resident < g["free_bytes"].get<double>();
  const json& bank = facts["expert_bank"];
  if (bank.is_null()) return a;
  const double bank_bytes = bank["total_bytes"].get<double>(), per_token = bank["bytes_per_token"].get<double>();
  // What RAM is left for the expert cache: available memory minus the resident weights and a margin
  // for states, scratch and the rest of the system (a tenth of RAM, at least 1 GB).
  const double margin = std::max(1e9, 0.1 * double(mem.total));
  const double room = std::max(0.0, available - resident - margin);
  // GB: the whole bank (rounded up to 0.01) when it fits, else the room rounded down to 0.1.
  const double suggested = bank_bytes <= room ? std::ceil(bank_bytes / 1e7) / 100 : std::floor(room / 1e8) / 10;
  a["suggested_cache_gb"] = suggested;
  a["whole_bank_fits"] = bank_bytes <= room;
  if (suggested <= 0)
    warnings.push_back("no RAM left for an expert cache beside the resident weights: every expert is read from the homes");
  if (o.cache_gb > 0 && o.cache_gb * 1e9 > available - resident)
    warnings.push_back("--cache-gb " + human_bytes(o.cache_gb * 1e9) + " is more than the RAM left beside the resident "
                       "weights (" + human_bytes(std::max(0.0, available - resident)) + " available)");
  const json& prep = facts["prepared"];
  const bool prepared = !prep.is_null() && !prep.contains("error");
  a["prepared"] = prepared;
  if (!prepared) {
    const double checkpoint = facts["checkpoint"]["bytes"].get<double>();
    if (checkpoint > available)
      warnings.push_back("not prepared: the experts would be used from the checkpoint in RAM (" + human_bytes(checkpoint) +
                         ", more than the " + human_bytes(available) + " available); run `sluice prepare --model " +
                         o.model + " --home PATH` to stream them");
    if (!prep.is_null()) warnings.push_back("the manifest is unusable: " + prep["error"].get<std::string>());
    return a;
  }
  // Aggregate read rate of the homes: measured now where it could be, else what prepare recorded.
  double rate = 0;
  for (const json& h : prep["homes"]) {
    double r = h["read_bytes_per_s"].get<double>();
    for (const json& d : dirs)
      if (d["path"] == h["path"] && d["read_bytes_per_s"].get<double>() > 0) r = d["read_bytes_per_s"].get<double>();
    if (!h["exists"].get<bool>()) warnings.push_back("prepared home " + h["path"].get<std::string>() + " is missing");
    rate += r;
  }
  a["homes_read_bytes_per_s"] = rate;
  const double cache = o.cache_gb > 0 ? o.cache_gb * 1e9 : suggested * 1e9;
  const double miss = bank_bytes > 0 ? std::max(0.0, 1.0 - cache / bank_bytes) : 0.0;
  json floor = {{"bytes_per_token_uncached", per_token},
                {"cache_bytes", cache},
                {"miss_fraction_uniform", miss}};
  if (rate > 0) {
    floor["ms_per_token_uncached"] = per_token / rate * 1e3;
    floor["ms_per_token_with_cache"] = per_token * miss / rate * 1e3;
  } else {
    warnings.push_back("no read rate for the prepared homes: run `sluice bench drives --model " + o.model + "`");
  }
  a["io_floor"] = floor;
  return a;
}

json run_doctor(const DoctorOptions& o) {
  json warnings = json::array();
  const bench::CpuFacts cpu = bench::cpu_facts();
  const bench::MemoryFacts mem = bench::memory_facts();
  json j;
  j["cpu"] = {{"model", cpu.model}, {"threads", cpu.threads}, {"isas", cpu.isas}, {"active_isa", cpu.active_isa}};
  j["memory"] = {{"total_bytes", mem.total}, {"available_bytes", mem.available}};
  json drives = json::array();
  for (const bench::BlockDevice& b : bench::block_devices())
    drives.push_back({{"name", b.name}, {"model", b.model}, {"bytes", b.bytes}, {"rotational", b.rotational}});
  j["block_devices"] = drives;
  j["gpus"] = gpus_json();
#if !defined(SLUICE_HAVE_CUDA)
  j["gpu_note"] = "this sluice was built without the CUDA device";
#endif
  {  // What the first streamed run on a GPU measured for --cpu-experts auto (store/hybrid_plan.h).
    const std::string path = store::hybrid_calibration_path();
    json rates = json::object();
    try {
      for (const auto& [key, r] : store::read_hybrid_calibrations(path)) rates[key] = store::hybrid_rates_json(r);
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
    j["hybrid_calibration"] = {{"path", path}, {"rates", rates}};
  }

  json facts = nullptr;
  std::vector<std::vector<bench::RecordRef>> home_records;
  std::vector<std::pair<std::string, std::string>> dirs;  // path, role
  std::set<std::string> seen;
  auto add_dir = [&](const std::string& p, const std::string& role) {
    std::error_code ec;
    const std::string key = fs::weakly_canonical(p, ec).string();
    if (seen.insert(ec ? p : key).second) dirs.emplace_back(p, role);
  };
  for (const std::string& h : o.homes) add_dir(h, "given");
  store::Manifest manifest;
  if (!o.model.empty()) {
    facts = model_facts(o.model);
    const json& prep = facts["prepared"];
    if (!prep.is_null() && !prep.contains("error")) {
      const store::ExpertBank bank = model::expert_bank_of(o.model);
      manifest = store::read_manifest(store::manifest_path(o.model), bank,
                                      store::model_identity(read_regular_file(o.model + "/config.json"), bank.layout));
      home_records = bench::manifest_records(manifest);
      for (const store::Home& h : manifest.homes) add_dir(h.path, "prepared home");
    }
    add_dir(o.model, "model directory");
  }
  if (dirs.empty()) add_dir(fs::current_path().string(), "working directory");

  json probes = json::array();
  for (const auto& [path, role] : dirs) {
    bench::DirProbeOptions po;
    po.seconds = o.seconds;
    for (size_t h = 0; h < manifest.homes.size(); ++h)
      if (manifest.homes[h].path == path && h < home_records.size()) po.records = home_records[h];
    if (!po.records.empty()) po.record_bytes = po.records.front().length;
    const bench::DirProbe p = bench::probe_dir(path, po);
    probes.push_back(probe_json(p, role));
    if (!p.exists) warnings.push_back(path + " (" + role + ") is not a directory");
    else if (!p.o_direct)
      warnings.push_back("no O_DIRECT on " + path + " (" + p.filesystem + "): " + p.o_direct_note +
                         "; expert reads there go through the page cache");
    if (p.exists && !p.io_uring) warnings.push_back("no io_uring on " + path + ": " + p.io_uring_note +
                                                     "; the reader uses its pread threads instead");
  }
  j["dirs"] = probes;
  if (!facts.is_null()) {
    j["model"] = {{"model_dir", o.model},
                  {"model_type", facts["model_type"]},
                  {"facts", facts},
                  {"advice", model_advice(facts, mem, probes, j["gpus"], o, warnings)}};
  }
  j["warnings"] = warnings;
  return j;
}

void print_text(const json& j) {
  auto line = [](const char* key, const std::string& value) { std::printf("%-13s%s\n", key, value.c_str()); };
  auto bytes = [](const json& v) { return human_bytes(v.get<double>()); };
  const json& cpu = j["cpu"];
  std::string isas;
  for (const json& i : cpu["isas"]) isas += " " + i.get<std::string>();
  line("cpu", (cpu["model"].get<std::string>().empty() ? "" : cpu["model"].get<std::string>() + ", ") +
                  std::to_string(cpu["threads"].get<unsigned>()) + " threads; ISAs" + isas + " (active: " +
                  cpu["active_isa"].get<std::string>() + ")");
  line("memory", bytes(j["memory"]["total_bytes"]) + " total, " + bytes(j["memory"]["available_bytes"]) + " available");
  std::string drives;
  for (const json& d : j["block_devices"])
    drives += (drives.empty() ? "" : "; ") + d["name"].get<std::string>() + " " + bytes(d["bytes"]) +
              (d["rotational"].get<bool>() ? " rotational" : "") +
              (d["model"].get<std::string>().empty() ? "" : " (" + d["model"].get<std::string>() + ")");
  line("drives", drives.empty() ? "none visible in /sys/block" : drives);
  std::string gpus;
  for (const json& g : j["gpus"])
    gpus += (gpus.empty() ? "" : "; ") + g["device"].get<std::string>() + " " +
            (g.contains("error") ? "error: " + g["error"].get<std::string>()
                                 : g["name"].get<std::string>() + ", " + bytes(g["free_bytes"]) + " free of " +
                                       bytes(g["total_bytes"]));
  line("gpus", !gpus.empty() ? gpus : j.contains("gpu_note") ? j["gpu_note"].get<std::string>() : "none");
  const json& cal = j["hybrid_calibration"];
  if (cal["rates"].empty()) {
    line("hybrid", "not measured yet (the first streamed run on a GPU measures it into " +
                              cal["path"].get<std::string>() + ")");
  } else {
    for (const auto& [key, r] : cal["rates"].items())
      line("hybrid", key + ": " +
                         store::hybrid_rates_text({r["link"].get<double>(), r["cores"].get<double>(),
                                                   r["link_shared"].get<double>(), r["cores_shared"].get<double>()}));
    line("", "(" + cal["path"].get<std::string>() + "; delete it to measure again)");
  }
  for (const json& d : j["dirs"]) {
    std::printf("%s (%s)\n", d["path"].get<std::string>().c_str(), d["role"].get<std::string>().c_str());
    if (!d["exists"].get<bool>()) continue;
    std::printf("  %s%s, %s free of %s; O_DIRECT %s; io_uring %s\n", d["filesystem"].get<std::string>().c_str(),
                d["device"].get<std::string>().empty() ? "" : (" on " + d["device"].get<std::string>()).c_str(),
                bytes(d["free_bytes"]).c_str(), bytes(d["total_bytes"]).c_str(), d["o_direct"].get<bool>() ? "yes" : "no",
                d["io_uring"].get<bool>() ? "yes" : "no");
    if (d["read_bytes_per_s"].get<double>() > 0)
      std::printf("  read %s/s (%s, %s read)\n", bytes(d["read_bytes_per_s"]).c_str(),
                  d["read_engine"].get<std::string>().c_str(), bytes(d["read_bytes"]).c_str());
    else
      std::printf("  read rate %s\n", d["read_note"].get<std::string>().c_str());
  }
  if (j.contains("model")) {
    const json& m = j["model"];
    const json& f = m["facts"];
    const json& a = m["advice"];
    line("model", m["model_dir"].get<std::string>() + " (" + f["model_type"].get<std::string>() + ")");
    line("resident", bytes(a["resident_bytes"]) + (a["resident_fits_ram"].get<bool>() ? ", fits" : ", does NOT fit") +
                         " in available RAM");
    const json& bank = f["expert_bank"];
    if (bank.is_null()) {
      line("experts", "none (a dense model)");
    } else {
      line("expert bank", bytes(bank["total_bytes"]) + " in " + std::to_string(bank["moe_layers"].get<int64_t>()) +
                              " layers x " + std::to_string(bank["experts_per_layer"].get<int64_t>()) + " records of " +
                              std::to_string(bank["record_bytes"].get<uint64_t>()) + " bytes; " +
                              bytes(bank["bytes_per_token"]) + " per token uncached");
      char cache[64];
      std::snprintf(cache, sizeof cache, a["suggested_cache_gb"].get<double>() < 1 ? "%.2f" : "%.1f",
                    a["suggested_cache_gb"].get<double>());
      line("cache", std::string("suggested --cache-gb ") + cache +
                        (a["whole_bank_fits"].get<bool>()
                             ? " (the whole expert bank fits in RAM)"
                             : " (available RAM less the resident weights and a margin of a tenth of RAM, 1 GB at least)"));
      if (!a["prepared"].get<bool>()) {
        line("homes", "not prepared: experts come from the checkpoint, resident in RAM");
      } else {
        line("homes", std::to_string(f["prepared"]["homes"].size()) + " prepared, " +
                          bytes(a["homes_read_bytes_per_s"]) + "/s together");
        const json& fl = a["io_floor"];
        if (fl.contains("ms_per_token_uncached")) {
          char s[200];
          std::snprintf(s, sizeof s, "%.3f ms per token uncached; %.3f ms with a %s cache (%.0f%% of reads miss if "
                        "routing were uniform)", fl["ms_per_token_uncached"].get<double>(),
                        fl["ms_per_token_with_cache"].get<double>(), bytes(fl["cache_bytes"]).c_str(),
                        100 * fl["miss_fraction_uniform"].get<double>());
          line("I/O floor", s);
        }
      }
    }
  }
  if (j["warnings"].empty()) {
    line("warnings", "none");
  } else {
    std::printf("warnings\n");
    for (const json& w : j["warnings"]) std::printf("  - %s\n", w.get<std::string>().c_str());
  }
}

}  // namespace

Action register_doctor(CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Check this machine for streaming a model: CPU, memory, drives and homes (O_DIRECT, io_uring, read "
                "rate), GPUs; with --model, what fits where and the I/O floor per token");
  sub->add_option("--model", o->model, "Model directory to size against this machine");
  sub->add_option("--home", o->homes, "A directory to check (repeatable; the model's prepared homes are checked anyway)");
  sub->add_option("--cache-gb", o->cache_gb, "The expert cache you mean to give `run`/`serve` (GB), to check against RAM")
      ->transform(positive_number(1e6));
  sub->add_option("--seconds", o->seconds, "Length of each directory's timed read")
      ->default_val(0.5)
      ->transform(positive_number(60));
  sub->add_flag("--json", o->json, "One JSON object instead of text");
  return [o] {
    const json j = run_doctor(*o);
    if (o->json) std::printf("%s\n", j.dump(1).c_str());
    else print_text(j);
    return 0;
  };
}

}  // namespace sluice::cli
