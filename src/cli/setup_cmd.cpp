// `sluice setup`: install a model from a URL or directory, fully (--full) or with routed
// experts fetched on first use (--stream).
#include <cstdio>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "core/error.h"
#include "fetch/setup.h"
#include "model/registry.h"

namespace sluice::cli {

Action register_setup(CLI::App& app) {
  auto a = std::make_shared<fetch::SetupOptions>();
  auto full = std::make_shared<bool>(false), stream = std::make_shared<bool>(false);
  auto no_measure = std::make_shared<bool>(false);
  auto stripe = std::make_shared<std::string>("auto");
  CLI::App* sub = app.add_subcommand(
      "setup",
      "Install a model from a Hugging Face-style repository (https://...) or a local directory.\n"
      "--full downloads every shard (parallel, resumable, size and SHA-256 checked) and prepares the experts;\n"
      "--stream downloads only the non-expert tensors and fetches each routed expert on first use.\n"
      "Interrupted? Run the same command again: it resumes.");
  sub->add_option("--source", a->source, "URL of the repository or a local directory")->required();
  sub->add_option("--model", a->model_dir, "Model directory to install into")->required();
  auto* f = sub->add_flag("--full", *full, "Download everything, then pack the experts onto the homes");
  auto* s = sub->add_flag("--stream", *stream, "Download non-expert tensors only; fetch experts on first use");
  f->excludes(s);
  sub->add_option("--home", a->homes, "PATH[:CAPACITY] of an expert home (repeat per drive; default MODEL/sluice-home)")
      ->transform(home_spec());
  sub->add_option("--jobs", a->jobs, "Parallel downloads")->default_val(4)->transform(integer_in(1, 64));
  sub->add_option("--retries", a->source_options.retries, "Retries of a failed transfer (each resumes)")
      ->default_val(4)
      ->transform(integer_in(0, 1000));
  sub->add_flag("--no-measure", *no_measure, "Skip measuring each home's read bandwidth (--full)");
  sub->add_option("--stripe", *stripe,
                  "Stripe each expert record across the homes: on, off, or auto (as `sluice prepare --stripe`)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_flag("--quiet", a->quiet, "No progress bars");
  return [a, full, stream, no_measure, stripe] {
    if (*full == *stream) fail("setup: choose exactly one of --full or --stream");
    a->mode = *full ? "full" : "stream";
    a->measure = !*no_measure;
    a->stripe = *stripe == "on"    ? store::PrepareOptions::Stripe::On
                : *stripe == "off" ? store::PrepareOptions::Stripe::Off
                                   : store::PrepareOptions::Stripe::Auto;
    a->expert_bank = model::expert_bank_from_config;
    fetch::setup(*a);
    std::fprintf(stderr, "setup: %s install of %s ready in %s\n", a->mode.c_str(), a->source.c_str(),
                 a->model_dir.c_str());
    return 0;
  };
}

}  // namespace sluice::cli
