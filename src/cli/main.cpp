// The `sluice` binary: one executable, one subcommand per job.
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/usage_error.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "sluice: runs the full, unmodified weights of giant mixture-of-experts models (Kimi K3, Kimi-Linear)\n"
      "on one machine, streaming routed experts from SSDs. Exact: the target model decides every token."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");
  std::vector<std::pair<CLI::App*, sluice::cli::Action>> actions;
  auto add = [&](sluice::cli::Action (*reg)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    auto action = reg(app);
    actions.emplace_back(app.get_subcommands({})[before], std::move(action));
  };
  add(sluice::cli::register_run);
  add(sluice::cli::register_make_tiny);
  add(sluice::cli::register_prepare);
  add(sluice::cli::register_setup);
  add(sluice::cli::register_verify);
  add(sluice::cli::register_upgrade);
  add(sluice::cli::register_warm);
  add(sluice::cli::register_bench);
  add(sluice::cli::register_serve);
  add(sluice::cli::register_tokenize);
  add(sluice::cli::register_detokenize);
  add(sluice::cli::register_devices);
  add(sluice::cli::register_export_gguf);
  add(sluice::cli::register_info);
  add(sluice::cli::register_doctor);
  add(sluice::cli::register_chat);
  // Exit status: 0 success (and --help, --version), 1 an error (bad file, bad model, failed
  // read), 2 a usage error (unknown option, a value out of range or not of its kind, flags that
  // conflict or lack the one they need), 3 an internal error, 130 interrupted (SIGINT/SIGTERM;
  // `run` prints what it generated first).
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  const char* command = "";
  try {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) {
        command = sub->get_name().c_str();
        return action();
      }
  } catch (const sluice::cli::UsageError& e) {
    std::fprintf(stderr, "sluice %s: usage error: %s\n", command, e.what());
    return 2;
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "sluice: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
