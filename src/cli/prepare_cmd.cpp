// `sluice prepare`: pack a model's routed experts onto one or more homes and write its manifest.
#include <cstdio>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/usage_error.h"
#include "core/error.h"
#include "model/registry.h"
#include "store/prepare.h"

namespace sluice::cli {

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
      "Each layer's experts are spread over the homes in proportion to their read rates, as `sluice bench\n"
      "drives --home ...` measured them (its <home>/sluice-drive.json; equal shares when a home has none);\n"
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
    opt.progress = [](uint64_t done, uint64_t total, const std::string& what) {
      std::fprintf(stderr, "\rprepare: %5.1f%%  %8.1f / %8.1f MB  %-40s", total ? 100.0 * done / total : 100.0,
                   done / 1e6, total / 1e6, what.c_str());
      if (done >= total) std::fprintf(stderr, "\n");
    };
    const std::vector<double> speeds = store::measured_drive_speeds(opt.homes);
    if (opt.rebalance && opt.homes.empty())
      std::fprintf(stderr, "prepare: re-placing onto the manifest's homes from their own records\n");
    else if (opt.homes.size() > 1 && speeds.empty())
      std::fprintf(stderr, "prepare: equal shares per home (no drive measurement on every home; `sluice bench drives "
                           "--home ...` measures them, and prepare then places by speed)\n");
    else if (opt.homes.size() > 1)
      std::fprintf(stderr, "prepare: placing by the measured read rates\n");
    store::Manifest m = store::prepare_experts(a->model_dir, model::expert_bank_of(a->model_dir), opt);
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
