// `sluice export-gguf`: reads config.json's model_type and hands the directory to the mapping of
// the llama.cpp architecture that shares it (export_arch.h).
#include "export/export_gguf.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/join.h"
#include "export/export_arch.h"
#include "format/json_util.h"

namespace sluice::gguf {

namespace {

// One line per llama.cpp architecture mapping (export_arch.h): the model_types it takes.
using Exporter = ExportSummary (*)(const std::string& dir, const nlohmann::json& root, const std::string& out,
                                   const ExportOptions& opt);
template <ExportSummary (*F)(const std::string&, const std::string&, const ExportOptions&)>
ExportSummary reads_its_own_config(const std::string& dir, const nlohmann::json&, const std::string& out,
                                   const ExportOptions& opt) {
  return F(dir, out, opt);
}
struct Mapping {
  const char* model_type;
  Exporter run;
};
constexpr Mapping kMappings[] = {
    {"kimi_k3", export_kimi},
    {"kimi_linear", export_kimi},
    {"deepseek_v3", reads_its_own_config<export_deepseek2>},
    {"kimi_k2", reads_its_own_config<export_deepseek2>},
    {"qwen3_moe", reads_its_own_config<export_qwen3moe>},
    {"gpt_oss", reads_its_own_config<export_gpt_oss>},
};

ExportSummary dispatch(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  namespace fs = std::filesystem;
  SLUICE_CHECK(fs::is_directory(model_dir), model_dir, ": not a model directory");
  const std::string config_path = (fs::path(model_dir) / "config.json").string();
  SLUICE_CHECK(fs::exists(config_path), model_dir, ": no config.json");
  const nlohmann::json root = format::read_json_file(config_path);
  const std::string model_type = root.is_object() && root.contains("model_type") && root["model_type"].is_string()
                                     ? root["model_type"].get<std::string>()
                                     : std::string("(none)");
  std::vector<std::string> supported;
  for (const Mapping& m : kMappings) {
    if (model_type == m.model_type) return m.run(model_dir, root, out, opt);
    supported.push_back(m.model_type);
  }
  fail(config_path, ": model_type '", model_type, "' cannot be exported to GGUF (supported: ", join(supported, ", "),
       ")");
}

}  // namespace

ExportSummary export_gguf(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  // Notes are held until the export succeeds: a refused export prints its one error line only.
  std::vector<std::string> notes;
  ExportOptions held = opt;
  if (opt.note) held.note = [&notes](const std::string& n) { notes.push_back(n); };
  ExportSummary sum = dispatch(model_dir, out, held);
  for (const std::string& n : notes) opt.note(n);
  return sum;
}

}  // namespace sluice::gguf
