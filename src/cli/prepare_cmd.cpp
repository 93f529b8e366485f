// `sluice prepare`: pack a model's routed experts onto one or more homes and write its manifest.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/drives.h"
#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/progress_line.h"
#include "cli/usage_error.h"
#include "core/error.h"
#include "model/registry.h"
#include "store/prepare.h"

namespace sluice::cli {
namespace fs = std::filesystem;

Action register_prepare(CLI::App& app) {
  struct Args {
    std::string model_dir, heat;
    std::vector<std::string> homes;
    double replicate_hot = 0;
    int full_copy = -1;
    bool no_measure = false, rebalance = false;
    std::string stripe = "auto";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "prepare",
      "Pack the routed experts onto homes (one directory per drive) for streaming, and write the manifest.\n"
      "Each layer's experts are spread over the homes in proportion to their read rates: <home>/sluice-drive.json,\n"
      "which `sluice bench drives --home ...` writes and which prepare measures the same way first when a home\n"
      "lacks it (a few seconds; --no-measure gives equal shares instead);\n"
      "--full-copy and --replicate-hot add replicas. With --stripe, every record is instead cut into one part\n"
      "per home, sized by the same rates, so each read keeps all the drives busy. After a new drive measurement, run prepare again to\n"
      "re-place: layer files whose contents stay are kept; with --rebalance the records come from the\n"
      "install's own homes (checked against the manifest), not the checkpoint.\n"
      "Resumable: run it again after an interruption.");
  sub->add_option("--model", a->model_dir, "Model directory (config.json + safetensors)")->required();
  sub->add_option("--home", a->homes,
                  "PATH[:CAPACITY] of a home, e.g. /mnt/nvme1/sluice:900G (repeat per drive; with --rebalance the "
                  "manifest's homes when none is given)")
      ->transform(home_spec());
  sub->add_option("--full-copy", a->full_copy, "Index (0-based, in --home order) of a home that gets every expert")
      ->transform(integer_in(0, 1 << 20));
  sub->add_option("--replicate-hot", a->replicate_hot, "Fraction of experts, hottest first, to place on a second home")
      ->transform(number_in(0, 1));
  sub->add_option("--stripe", a->stripe,
                  "Stripe each record across the homes: on, off, or auto (on with two or more homes, no replicas, and "
                  "records big enough that every home's part is at least 512 KiB)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_option("--heat", a->heat, "Usage counts to rank experts (default: the model's sluice-heat.json)");
  sub->add_flag("--no-measure", a->no_measure, "Skip measuring each home's read bandwidth");
  sub->add_flag("--rebalance", a->rebalance,
                "Re-place an existing install (after `sluice bench drives`, or onto other homes) from its own homes, "
                "without reading the checkpoint; the old install stays whole until the new manifest is written");
  return [a] {
    store::PrepareOptions opt;
    for (const auto& h : a->homes) opt.homes.push_back(store::parse_home_spec(h));
    opt.full_copy_home = a->full_copy;
    opt.replicate_hot = a->replicate_hot;
    opt.heat_file = a->heat;
    opt.measure = !a->no_measure;
    opt.rebalance = a->rebalance;
    opt.stripe = a->stripe == "on"    ? store::PrepareOptions::Stripe::On
                 : a->stripe == "off" ? store::PrepareOptions::Stripe::Off
                                      : store::PrepareOptions::Stripe::Auto;
    if (opt.homes.empty() && !opt.rebalance) usage_fail("--home is required (one per drive; or --rebalance)");
    auto line = std::make_shared<ProgressLine>("prepare");
    opt.progress = [line](uint64_t done, uint64_t total, const std::string& what) { line->update(done, total, what); };
    // One drive measurement: where a home has none yet (no sluice-drive.json), prepare runs the one
    // `sluice bench drives` makes (expert-sized O_DIRECT reads, every home at once, at the engine's
    // queue depth), stores it on each home as bench drives does, and places by it.
    const store::ExpertBank bank = model::expert_bank_of(a->model_dir);
    if (opt.measure && opt.homes.size() > 1 && store::measured_drive_speeds(opt.homes).empty()) {
      bench::DriveOptions d;
      for (const store::Home& h : opt.homes) d.homes.push_back(h.path);
      d.depths = {d.store_queue_depth};
      d.seconds = 1;
      d.record_bytes = bank.layout.slot_bytes;
      d.probe_bytes = uint64_t(128) << 20;
      d.log = [](const std::string& s) { std::fprintf(stderr, "prepare: drives: %s\n", s.c_str()); };
      std::fprintf(stderr, "prepare: measuring the homes' read rates (as `sluice bench drives`; --no-measure skips)\n");
      std::vector<bool> had_probe;
      for (const std::string& h : d.homes) had_probe.push_back(fs::exists(h + "/sluice-drive-probe.bin"));
      bench::measure_drives(d);
      // The probe files prepare wrote to have something to read go again (the experts follow).
      for (size_t i = 0; i < d.homes.size(); ++i)
        if (!had_probe[i]) fs::remove(d.homes[i] + "/sluice-drive-probe.bin");
    }
    const std::vector<double> speeds = store::measured_drive_speeds(opt.homes);
    if (opt.rebalance && opt.homes.empty())
      std::fprintf(stderr, "prepare: re-placing onto the manifest's homes from their own records\n");
    else if (opt.homes.size() > 1 && speeds.empty())
      std::fprintf(stderr, "prepare: equal shares per home (no drive measurement on every home; `sluice bench drives "
                           "--home ...` measures them, and prepare then places by speed)\n");
    else if (opt.homes.size() > 1)
      std::fprintf(stderr, "prepare: placing by the measured read rates\n");
    store::Manifest m = store::prepare_experts(a->model_dir, bank, opt);
    const bool striped = !m.holders.empty() && [&] {
      for (const auto& layer : m.holders)
        if (!layer.empty()) return store::parts_of(layer[0]).size() > 1;
      return false;
    }();
    std::fprintf(stderr, "prepare: %s\n",
                 striped ? "each record is striped across the homes (one part per home)"
                         : "each record is held whole on its home(s)");
    double total = 0;
    for (size_t h = 0; h < m.homes.size(); ++h) total += double(m.bytes_on_home(int(h)));
    for (size_t h = 0; h < m.homes.size(); ++h)
      std::fprintf(stderr, "prepare: home %zu %s holds %.1f MB (%.1f%%), reads at %.0f MB/s\n", h,
                   m.homes[h].path.c_str(), m.bytes_on_home(int(h)) / 1e6,
                   total > 0 ? 100.0 * double(m.bytes_on_home(int(h))) / total : 0.0, m.homes[h].read_bytes_per_s / 1e6);
    std::fprintf(stderr, "prepare: manifest written to %s\n", store::manifest_path(a->model_dir).c_str());
    return 0;
  };
}

}  // namespace sluice::cli
