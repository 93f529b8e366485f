// `sluice info --model DIR [--json]`: what a model directory is, without loading it: architecture,
// parameters (total, routed experts, active per token), number formats by tensor class, the expert
// bank, tokenizer and chat format, the checkpoint, and what `prepare` laid out on which homes.
#include <cstdio>
#include <string>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_facts.h"

namespace sluice::cli {
namespace {

using nlohmann::json;

void print_text(const json& j) {
  auto line = [](const char* key, const std::string& value) { std::printf("%-13s%s\n", key, value.c_str()); };
  auto count = [](const json& v) { return human_count(v.get<double>()); };
  auto bytes = [](const json& v) { return human_bytes(v.get<double>()); };
  line("model", j["model_dir"].get<std::string>());
  line("architecture", j["model_type"].get<std::string>() + " (sluice family " + j["family"].get<std::string>() + "), " +
                           std::to_string(j["layers"].get<int64_t>()) + " layers");
  const json& p = j["parameters"];
  const json& bank = j["expert_bank"];
  std::string params = count(p["total"]) + " total";
  if (!bank.is_null())
    params += "; routed experts " + count(p["routed_experts"]) + " (" + count(p["per_expert"]) + " each); active per token " +
              count(p["active_per_token"]) + " (" + std::to_string(bank["experts_per_token"].get<int64_t>()) +
              " experts per MoE layer)";
  line("parameters", params);
  std::printf("tensors      %-16s %8s %10s  %s\n", "class", "params", "bytes", "formats");
  for (const json& c : j["tensor_classes"]) {
    std::string formats;
    for (const auto& [f, b] : c["formats"].items()) formats += (formats.empty() ? "" : ", ") + f + " " + bytes(b);
    std::printf("             %-16s %8s %10s  %s\n", c["name"].get<std::string>().c_str(), count(c["params"]).c_str(),
                bytes(c["bytes"]).c_str(), formats.c_str());
  }
  line("resident", bytes(j["resident_bytes"]) + " (everything but the routed experts: what stays in memory when they stream)");
  if (bank.is_null()) {
    line("expert bank", "none (a dense model: nothing to stream)");
  } else {
    std::string m;
    for (const json& x : bank["matrices"])
      m += (m.empty() ? "" : ", ") + x["slot"].get<std::string>() + " " + x["type"].get<std::string>() + " [" +
           std::to_string(x["rows"].get<int64_t>()) + ", " + std::to_string(x["cols"].get<int64_t>()) + "]";
    line("expert bank", std::to_string(bank["moe_layers"].get<int64_t>()) + " MoE layers x " +
                            std::to_string(bank["experts_per_layer"].get<int64_t>()) + " experts; record " +
                            std::to_string(bank["record_bytes"].get<uint64_t>()) + " bytes (" + m + "); " +
                            bytes(bank["total_bytes"]) + " in all, " + bytes(bank["bytes_per_token"]) +
                            " per token uncached");
  }
  const json& tok = j["tokenizer"];
  if (tok.is_null()) line("tokenizer", "none (ids in, ids out)");
  else if (tok.contains("error")) line("tokenizer", "unreadable: " + tok["error"].get<std::string>());
  else
    line("tokenizer", tok["kind"].get<std::string>() + ", " + std::to_string(tok["vocab_size"].get<int64_t>()) +
                          " ids; chat format " +
                          (tok["chat_format"].is_null() ? std::string("none detected") : tok["chat_format"].get<std::string>()));
  line("checkpoint", std::to_string(j["checkpoint"]["shards"].get<int64_t>()) + " safetensors shards, " +
                         bytes(j["checkpoint"]["bytes"]));
  const json& prep = j["prepared"];
  if (bank.is_null()) return;
  if (prep.is_null()) {
    line("prepared", "no (experts are read from the checkpoint; `sluice prepare --model DIR --home PATH` lays them out)");
    return;
  }
  if (prep.contains("error")) {
    line("prepared", "manifest unusable: " + prep["error"].get<std::string>());
    return;
  }
  const json& r = prep["replicas"];
  char rep[96];
  std::snprintf(rep, sizeof rep, "%.2f copies per expert (min %llu, max %llu)", r["mean"].get<double>(),
                (unsigned long long)r["min"].get<uint64_t>(), (unsigned long long)r["max"].get<uint64_t>());
  std::string what = std::to_string(prep["homes"].size()) + " homes, " + rep;
  if (prep["stripes"].get<uint64_t>() > 1)
    what += ", each striped in " + std::to_string(prep["stripes"].get<uint64_t>()) + " parts";
  if (prep["experts_not_local"].get<uint64_t>() > 0)
    what += "; " + std::to_string(prep["experts_not_local"].get<uint64_t>()) + " experts not fetched yet";
  line("prepared", what);
  for (const json& h : prep["homes"]) {
    const double rate = h["read_bytes_per_s"].get<double>();
    std::printf("             %s: %llu %s, %s%s%s%s\n", h["path"].get<std::string>().c_str(),
                (unsigned long long)h["experts"].get<uint64_t>(),
                prep["stripes"].get<uint64_t>() > 1 ? "expert parts" : "experts", bytes(h["bytes"]).c_str(),
                h["capacity_bytes"].get<uint64_t>() ? (", capacity " + bytes(h["capacity_bytes"])).c_str() : "",
                rate > 0 ? (", measured " + bytes(rate) + "/s").c_str() : ", rate not measured",
                h["exists"].get<bool>() ? "" : " (MISSING)");
  }
}

}  // namespace

Action register_info(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "info", "Describe a model directory without loading it: architecture, parameters, formats, expert bank, "
              "tokenizer and chat format, what is prepared where");
  sub->add_option("--model", *dir, "Model directory (config.json, safetensors, tokenizer files)")->required();
  sub->add_flag("--json", *as_json, "One JSON object instead of text");
  return [dir, as_json] {
    const json j = model_facts(*dir);
    if (*as_json) std::printf("%s\n", j.dump(1).c_str());
    else print_text(j);
    return 0;
  };
}

}  // namespace sluice::cli
