// `sluice run`: load a model and generate greedily from prompt token ids (or text, with the
// model's tokenizer). --json prints exactly one JSON object on stdout (a stable contract).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "kernels/cpu/kernels.h"
#include "model/kimi.h"
#include "runtime/generate.h"

namespace sluice::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX)
      fail("--prompt-ids: '", item, "' is not a non-negative token id (expected e.g. 1,2,3)");
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) fail("--prompt-ids is empty");
  return ids;
}

struct RunArgs {
  std::string model_dir, prompt_ids;
  int64_t max_new = 32, prefill_chunk = 512;
  bool stats = false, json = false, no_eos = false;
  std::string isa;
};

int run(const RunArgs& a) {
  if (!a.isa.empty()) kernels::set_active_isa(a.isa);
  std::vector<int32_t> prompt = parse_ids(a.prompt_ids);
  auto model = model::KimiModel::load(a.model_dir);
  auto state = model->new_state();
  runtime::GenerateOptions opt;
  opt.max_new = a.max_new;
  opt.prefill_chunk = a.prefill_chunk;
  opt.stop_at_eos = !a.no_eos;
  auto on_token = [&](int32_t id) {
    if (!a.json) {
      std::printf("%d ", id);
      std::fflush(stdout);
    }
  };
  runtime::GenerateResult r = runtime::generate_greedy(*model, state, prompt, opt, on_token);
  if (a.json) {
    nlohmann::json j = {{"prompt_ids", prompt},
                        {"generated_ids", r.generated},
                        {"prefill_ms", r.prefill_ms},
                        {"decode_ms", r.decode_ms},
                        {"stop_reason", r.stop_reason}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\n");
  }
  if (a.stats) {
    const auto& c = model->counters();
    double decode_tokens = double(r.generated.size() > 0 ? r.generated.size() - 1 : 0);
    std::fprintf(stderr,
                 "[stats] prompt=%zu generated=%zu prefill=%.1f ms (%.1f tok/s) decode=%.1f ms (%.2f tok/s) "
                 "passes=%lld expert_requests=%lld routed_slots=%lld isa=%s stop=%s\n",
                 prompt.size(), r.generated.size(), r.prefill_ms, prompt.size() * 1000.0 / std::max(r.prefill_ms, 1e-9),
                 r.decode_ms, decode_tokens * 1000.0 / std::max(r.decode_ms, 1e-9), (long long)c.passes,
                 (long long)c.moe.expert_requests, (long long)c.moe.routed_slots, kernels::active_isa().name,
                 r.stop_reason.c_str());
  }
  return 0;
}

}  // namespace

Action register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "Generate greedily from a prompt with a Kimi K3 or Kimi-Linear checkpoint");
  sub->add_option("--model", a->model_dir, "Model directory (config.json + safetensors)")->required();
  sub->add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids, e.g. 1,2,3")->required();
  sub->add_option("--max-new", a->max_new, "Maximum number of tokens to generate")->default_val(32)->check(CLI::NonNegativeNumber);
  sub->add_option("--prefill-chunk", a->prefill_chunk, "Prompt positions per prefill pass")->default_val(512)->check(CLI::PositiveNumber);
  sub->add_flag("--stats", a->stats, "Print timing and expert counters to stderr");
  sub->add_flag("--json", a->json,
                "Print one JSON object on stdout: prompt_ids, generated_ids, prefill_ms, decode_ms, stop_reason");
  sub->add_flag("--ignore-eos", a->no_eos, "Keep generating past the end-of-sequence token");
  sub->add_option("--isa", a->isa, "Kernel ISA: scalar, avx2 or avx512 (default: best available)");
  return [a] { return run(*a); };
}

}  // namespace sluice::cli
