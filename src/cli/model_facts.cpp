// Model facts for info and doctor: the model summary, the tokenizer, the shards and the manifest,
// each part reported as an error string instead of failing the whole report.
#include "cli/model_facts.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/regular_file.h"
#include "model/model_summary.h"
#include "store/manifest.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* slot_name(store::ExpertSlot s) {
  switch (s) {
    case store::ExpertSlot::Gate: return "gate";
    case store::ExpertSlot::Up: return "up";
    case store::ExpertSlot::Down: return "down";
  }
  return "?";
}

json tokenizer_facts(const std::string& dir) {
  try {
    auto tok = tokenizer::load_tokenizer(dir);
    if (!tok) return nullptr;
    json j = {{"kind", tok->describe()}, {"vocab_size", tok->vocab_size()}};
    const auto format = tokenizer::detect_chat_format(*tok, tokenizer::read_chat_template(dir));
    j["chat_format"] = format ? json(tokenizer::chat_format_name(*format)) : json(nullptr);
    return j;
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

json checkpoint_facts(const std::string& dir) {
  int64_t shards = 0;
  uint64_t bytes = 0;
  std::error_code ec;
  for (const fs::directory_entry& de : fs::directory_iterator(dir, ec)) {
    const std::string name = de.path().filename().string();
    if (de.path().extension() != ".safetensors" || name == "expected.safetensors") continue;
    ++shards;
    bytes += de.file_size(ec);
  }
  return {{"shards", shards}, {"bytes", bytes}};
}

json prepared_facts(const std::string& dir, const store::ExpertBank& bank) {
  const std::string path = store::manifest_path(dir);
  if (bank.empty() || !fs::exists(path)) return nullptr;
  try {
    const std::string config = read_regular_file(dir + "/config.json");
    const store::Manifest m = store::read_manifest(path, bank, store::model_identity(config, bank.layout));
    json homes = json::array();
    std::vector<uint64_t> experts(m.homes.size(), 0);
    uint64_t min_copies = UINT64_MAX, max_copies = 0, copies = 0, records = 0, missing = 0, max_parts = 0;
    for (const auto& layer : m.holders)
      for (const auto& holders : layer) {
        if (holders.empty()) continue;
        ++records;
        const uint64_t n = store::copies_of(holders);
        min_copies = std::min(min_copies, n);
        max_copies = std::max(max_copies, n);
        copies += n;
        max_parts = std::max<uint64_t>(max_parts, store::parts_of(holders).size());
        bool local = false;
        for (const store::Holder& h : holders) {
          experts[size_t(h.home)] += 1;
          local = local || h.local;
        }
        missing += local ? 0 : 1;
      }
    for (size_t h = 0; h < m.homes.size(); ++h) {
      std::error_code ec;
      homes.push_back({{"path", m.homes[h].path},
                       {"exists", fs::is_directory(m.homes[h].path, ec)},
                       {"experts", experts[h]},
                       {"bytes", m.bytes_on_home(int(h))},
                       {"capacity_bytes", m.homes[h].capacity_bytes},
                       {"read_bytes_per_s", m.homes[h].read_bytes_per_s}});
    }
    return {{"manifest", path},
            {"model_id", m.model_id},
            {"homes", homes},
            {"experts", records},
            {"experts_not_local", missing},
            {"stripes", max_parts},
            {"replicas", {{"min", records ? min_copies : 0}, {"max", max_copies},
                          {"mean", records ? double(copies) / double(records) : 0.0}}}};
  } catch (const std::exception& e) {
    return {{"manifest", path}, {"error", e.what()}};
  }
}

}  // namespace

namespace {

// v in steps of 1000 up to the last unit, three significant digits once scaled (whole below the
// first step); each unit carries its own leading space.
template <size_t N>
std::string scaled(double v, const char* const (&units)[N]) {
  size_t u = 0;
  while (v >= 1000 && u + 1 < N) {
    v /= 1000;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, u == 0 ? "%.0f%s" : v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[u]);
  return out;
}

}  // namespace

std::string human_bytes(double b) {
  static const char* const units[] = {" B", " kB", " MB", " GB", " TB", " PB"};
  return scaled(b, units);
}

std::string human_count(double n) {
  static const char* const units[] = {"", " K", " M", " B", " T"};
  return scaled(n, units);
}

json model_facts(const std::string& dir) {
  const model::ModelSummary s = model::summarize_model(dir);
  json classes = json::array(), quantization = json::object();
  for (const model::TensorClass& c : s.classes) {
    json formats = json::object();
    std::vector<std::pair<uint64_t, std::string>> by_bytes;
    for (const auto& [f, bytes] : c.bytes_by_format) {
      formats[f] = bytes;
      if (f != "scales") by_bytes.emplace_back(bytes, f);
    }
    // The class's formats, the largest first ("MXFP4+BF16": MXFP4 weights with BF16 biases).
    std::sort(by_bytes.begin(), by_bytes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string names;
    for (const auto& [bytes, f] : by_bytes) names += (names.empty() ? "" : "+") + f;
    classes.push_back({{"name", c.name}, {"tensors", c.tensors}, {"params", c.params}, {"bytes", c.bytes}, {"formats", formats}});
    quantization[c.name] = names;
  }
  json bank = nullptr;
  if (!s.bank.empty()) {
    json matrices = json::array();
    for (const store::ExpertMatrix& m : s.bank.layout.matrices)
      matrices.push_back({{"slot", slot_name(m.slot)}, {"type", device::weight_type_name(m.type)}, {"rows", m.rows},
                          {"cols", m.cols}});
    bool fused = false;
    for (const store::ExpertSegment& seg : s.bank.layout.segments) fused = fused || store::ExpertBank::fused(seg);
    bank = {{"moe_layers", s.bank.moe_layers.size()},
            {"experts_per_layer", s.bank.num_experts},
            {"experts_per_token", s.top_k},
            {"record_bytes", s.bank.layout.record_bytes},
            {"slot_bytes", s.bank.layout.slot_bytes},
            {"total_bytes", s.routed_bytes},
            {"bytes_per_token", s.routed_bytes_per_token},
            {"segments", s.bank.layout.segments.size()},
            {"fused_per_layer", fused},
            {"gate_up_interleaved", s.bank.layout.gate_up_interleaved},
            {"matrices", matrices}};
  }
  return {{"model_dir", dir},
          {"model_type", s.model_type},
          {"family", s.family},
          {"layers", s.layers},
          {"parameters", {{"total", s.total_params},
                          {"routed_experts", s.routed_params},
                          {"per_expert", s.params_per_expert},
                          {"active_per_token", s.active_params}}},
          {"quantization", quantization},
          {"tensor_classes", classes},
          {"resident_bytes", s.resident_bytes},
          {"expert_bank", bank},
          {"tokenizer", tokenizer_facts(dir)},
          {"checkpoint", checkpoint_facts(dir)},
          {"prepared", prepared_facts(dir, s.bank)}};
}

}  // namespace sluice::cli
