// The architecture mappings export_gguf() dispatches to by config.json's model_type. Each reads the
// model through sluice's own config parser, tensor list and expert bank, refuses by name what
// llama.cpp's graph for the architecture cannot express, and writes `out` as that architecture's
// GGUF, as llama.cpp's converter writes it.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "export/export_gguf.h"

namespace sluice::gguf {

// kimi_k3 -> kimi-k3, kimi_linear -> kimi-linear (export_kimi.cpp).
ExportSummary export_kimi(const std::string& dir, const nlohmann::json& root, const std::string& out,
                          const ExportOptions& opt);
// deepseek_v3, kimi_k2 -> deepseek2 (export_deepseek.cpp).
ExportSummary export_deepseek2(const std::string& dir, const std::string& out, const ExportOptions& opt);
// qwen3_moe -> qwen3moe (export_qwen3moe.cpp).
ExportSummary export_qwen3moe(const std::string& dir, const std::string& out, const ExportOptions& opt);
// gpt_oss -> gpt-oss (export_gpt_oss.cpp).
ExportSummary export_gpt_oss(const std::string& dir, const std::string& out, const ExportOptions& opt);

}  // namespace sluice::gguf
