// Subcommand registration: each command file adds its subcommand to the app and returns the
// function to run when it was chosen. Front ends know nothing of tensors.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace sluice::cli {

using Action = std::function<int()>;

// Each returns the action to run if its subcommand is selected.
Action register_run(CLI::App& app);
Action register_make_tiny(CLI::App& app);
Action register_prepare(CLI::App& app);
Action register_setup(CLI::App& app);
Action register_verify(CLI::App& app);
Action register_upgrade(CLI::App& app);
Action register_warm(CLI::App& app);
Action register_bench(CLI::App& app);
Action register_serve(CLI::App& app);
Action register_tokenize(CLI::App& app);
Action register_detokenize(CLI::App& app);
Action register_devices(CLI::App& app);
Action register_export_gguf(CLI::App& app);
Action register_info(CLI::App& app);
Action register_doctor(CLI::App& app);
Action register_chat(CLI::App& app);

}  // namespace sluice::cli
