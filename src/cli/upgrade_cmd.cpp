// `sluice upgrade`: migrate an installation's manifest to the current format in place.
#include <cstdio>

#include "cli/commands.h"
#include "fetch/upgrade.h"
#include "model/registry.h"

namespace sluice::cli {

Action register_upgrade(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "upgrade", "Migrate an installation made by an older sluice to the current manifest format, in place.\n"
                 "Never re-downloads or rewrites expert bytes; the old manifest is kept as a .bak file");
  sub->add_option("--model", *dir, "Model directory")->required();
  return [dir] {
    fetch::UpgradeResult r = fetch::upgrade_install(*dir, model::expert_bank_of(*dir));
    if (r.from == r.to) {
      std::fprintf(stderr, "upgrade: %s is already at manifest version %d\n", dir->c_str(), r.to);
    } else {
      std::fprintf(stderr, "upgrade: manifest version %d -> %d; old manifest kept at %s\n", r.from, r.to,
                   r.backup.c_str());
    }
    return 0;
  };
}

}  // namespace sluice::cli
