// `sluice warm`: plan (or, with --fetch N, do) the fetch of the experts a router trace used.
#include <cstdio>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "fetch/progress.h"
#include "fetch/warm.h"
#include "model/registry.h"

namespace sluice::cli {

Action register_warm(CLI::App& app) {
  struct Args {
    std::string model_dir, trace;
    int64_t fetch = 0, top = 10;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "warm", "Rank the experts a router trace (`sluice run --router-trace FILE`) used and report which are\n"
              "local; --fetch N fetches the N most used ones not fetched yet (--stream installs)");
  sub->add_option("--model", a->model_dir, "Model directory")->required();
  sub->add_option("--trace", a->trace, "Router trace (JSON lines) written by `sluice run --router-trace`")->required();
  sub->add_option("--fetch", a->fetch, "Fetch this many of the most used missing experts")
      ->transform(integer_in(0, INT32_MAX));
  sub->add_option("--top", a->top, "How many of the most used experts to list")
      ->default_val(10)
      ->transform(integer_in(0, INT32_MAX));
  return [a] {
    fetch::WarmReport r = fetch::warm(a->model_dir, model::expert_bank_of(a->model_dir), a->trace, a->fetch);
    std::printf("warm: %llu experts used by the trace: %llu local, %llu missing (%s to fetch)",
                (unsigned long long)r.used, (unsigned long long)r.local, (unsigned long long)r.missing,
                fetch::human_bytes(double(r.bytes_missing)).c_str());
    if (a->fetch) std::printf("; fetched %llu now", (unsigned long long)r.fetched);
    std::printf("\n");
    for (int64_t i = 0; i < a->top && i < int64_t(r.ranked.size()); ++i)
      std::printf("  layer %3d expert %4d  used %llu  %s\n", r.ranked[size_t(i)].layer, r.ranked[size_t(i)].expert,
                  (unsigned long long)r.ranked[size_t(i)].uses, r.ranked[size_t(i)].local ? "local" : "missing");
    return 0;
  };
}

}  // namespace sluice::cli
