// `sluice export-gguf`: reads config.json's model_type and hands the directory to the mapping of
// the llama.cpp architecture that shares it (export_arch.h).
#include "export/export_gguf.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "export/export_arch.h"
#include "format/json_util.h"

namespace sluice::gguf {

namespace {

ExportSummary dispatch(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  namespace fs = std::filesystem;
  SLUICE_CHECK(fs::is_directory(model_dir), model_dir, ": not a model directory");
  const std::string config_path = (fs::path(model_dir) / "config.json").string();
  SLUICE_CHECK(fs::exists(config_path), model_dir, ": no config.json");
  const nlohmann::json root = format::read_json_file(config_path);
  const std::string model_type = root.is_object() && root.contains("model_type") && root["model_type"].is_string()
                                     ? root["model_type"].get<std::string>()
                                     : std::string("(none)");
  if (model_type == "kimi_k3" || model_type == "kimi_linear") return export_kimi(model_dir, root, out, opt);
  if (model_type == "deepseek_v3" || model_type == "kimi_k2") return export_deepseek2(model_dir, out, opt);
  if (model_type == "qwen3_moe") return export_qwen3moe(model_dir, out, opt);
  if (model_type == "gpt_oss") return export_gpt_oss(model_dir, out, opt);
  fail(config_path, ": model_type '", model_type,
       "' cannot be exported to GGUF (supported: kimi_k3, kimi_linear, deepseek_v3, kimi_k2, qwen3_moe, gpt_oss)");
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
