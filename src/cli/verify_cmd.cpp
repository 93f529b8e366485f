// `sluice verify`: re-check an installation (files, manifest, expert records); --repair re-fetches
// bad pieces from the source.
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "fetch/verify.h"
#include "model/registry.h"

namespace sluice::cli {

Action register_verify(CLI::App& app) {
  struct Args {
    std::string model_dir;
    bool repair = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every file (size, SHA-256) and expert record (xxh3) of an installation; changes nothing\n"
                "unless --repair is given, which fetches bad pieces again from the source");
  sub->add_option("--model", a->model_dir, "Model directory")->required();
  sub->add_flag("--repair", a->repair, "Re-fetch bad files and expert records from the source");
  return [a] {
    fetch::VerifyReport r = fetch::verify_install(a->model_dir, model::expert_bank_from_config, a->repair);
    std::fprintf(stderr, "verify: %llu files and %llu expert holders (copies, or stripes of one) checked, %llu experts not fetched yet; %zu problems",
                 (unsigned long long)r.files_checked, (unsigned long long)r.experts_checked,
                 (unsigned long long)r.experts_missing, r.problems.size());
    if (a->repair) std::fprintf(stderr, ", %zu repaired, %zu not repaired", r.repaired.size(), r.unfixed.size());
    std::fprintf(stderr, "\n");
    for (const auto& u : r.unfixed) std::fprintf(stderr, "verify: not repaired: %s\n", u.c_str());
    return r.ok() ? 0 : 1;
  };
}

}  // namespace sluice::cli
