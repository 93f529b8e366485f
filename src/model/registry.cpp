// The registry: one line per architecture file set, and loading by config.json's model_type.
#include "model/registry.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/join.h"
#include "format/json_util.h"
#include "model/arch/deepseek.h"
#include "model/arch/gpt_oss.h"
#include "model/arch/kimi.h"
#include "model/arch/qwen3.h"

namespace sluice::model {
namespace {

std::string read_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read (is ", dir, " a model directory?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool TargetInfo::is_eos(int32_t id) const {
  for (int32_t e : eos_token_ids)
    if (e == id) return true;
  return false;
}

int64_t capture_slots(const HiddenCapture* capture, int64_t num_layers, std::vector<int>& slots) {
  if (!capture) return 0;
  slots.assign(size_t(num_layers), -1);
  const int64_t n = int64_t(capture->layers.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = capture->layers[size_t(i)];
    if (l < 0 || l >= num_layers)
      fail("hidden-row capture names layer ", l, ", outside the target's layers 0..", num_layers - 1);
    slots[size_t(l)] = int(i);
  }
  return n;
}

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all = {&kKimiArchitecture, &kQwen3Architecture, &kDeepSeekArchitecture,
                                                       &kGptOssArchitecture};
  return all;
}

std::string model_type_of(const std::string& config_text, const std::string& where) {
  const nlohmann::json root = format::parse_json_text(config_text, where);
  if (!root.is_object()) fail(where, ": expected a JSON object");
  if (!root.contains("model_type") || !root["model_type"].is_string())
    fail(where, ": no model_type string; cannot tell which architecture this is");
  return root["model_type"].get<std::string>();
}

const Architecture& find_architecture(const std::string& model_type, const std::string& where) {
  std::vector<std::string> known;
  for (const Architecture* a : architectures())
    for (const std::string& t : a->model_types) {
      if (t == model_type) return *a;
      known.push_back(t);
    }
  fail(where, ": model_type '", model_type, "' is not supported (sluice runs ", join(known, ", "), ")");
}

std::unique_ptr<Target> load_target(const LoadOptions& opt) {
  const std::string where = opt.dir + "/config.json";
  return find_architecture(model_type_of(read_config(opt.dir), where), where).load(opt);
}

std::unique_ptr<Target> load_target(const std::string& dir) { return load_target(LoadOptions{.dir = dir}); }

store::ExpertBank expert_bank_from_config(const std::string& config_text, const std::string& where) {
  return find_architecture(model_type_of(config_text, where), where).expert_bank(config_text, where);
}

store::ExpertBank expert_bank_of(const std::string& dir) {
  return expert_bank_from_config(read_config(dir), dir + "/config.json");
}

}  // namespace sluice::model
