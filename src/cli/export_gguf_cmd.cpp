// `sluice export-gguf`: write a model directory as a GGUF file llama.cpp loads (the same weights, in
// llama.cpp's layout for kimi-k3, kimi-linear, deepseek2, qwen3moe or gpt-oss).
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "export/export_gguf.h"

namespace sluice::cli {

Action register_export_gguf(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  auto f32 = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "export-gguf",
      "Write a model as a GGUF file for llama.cpp (kimi_k3 -> kimi-k3, kimi_linear -> kimi-linear, deepseek_v3 "
      "and kimi_k2 -> deepseek2, qwen3_moe -> qwen3moe, gpt_oss -> gpt-oss)");
  sub->footer(
      "The same weights in llama.cpp's layout, with the metadata keys, tensor names, shapes and tokenizer\n"
      "arrays its own converter writes: BF16 stays BF16, F32 stays F32, MXFP4 routed experts are repacked\n"
      "losslessly into ggml's MXFP4 blocks (gpt-oss's interleaved gate/up rows taken apart); norms, biases,\n"
      "routers, sinks and conv taps are widened exactly to F32 as llama.cpp reads them. Nothing is written\n"
      "as F16. FP8 (DeepSeek-V3, Qwen3 FP8 releases) and INT4 (Kimi-K2-Thinking) weights have no GGUF type\n"
      "in llama.cpp and are exported only with --f32: FP8 as each value times its 128x128 block scale in\n"
      "fp32 (the product DeepSeek's reference dequantization makes), INT4 as bf16(q*s) widened; the file is\n"
      "then 4x (FP8) or 8x (INT4) the checkpoint's bytes for those weights. A model without tokenizer files\n"
      "gets tokenizer model 'none' (llama.cpp then runs on token ids only). The file is written to FILE.tmp\n"
      "and renamed when complete. A checkpoint feature llama.cpp's graph cannot express (for example\n"
      "grouped routing in kimi-linear, a dense layer in qwen3moe, YaRN beta_fast/beta_slow other than\n"
      "32/1) is refused with an error naming it.");
  sub->add_option("--model", *model, "Model directory (config.json, safetensors, tiktoken.model)")->required();
  sub->add_option("--out", *out, "Output GGUF file")->required();
  sub->add_flag("--quiet", *quiet, "No progress on stderr");
  sub->add_flag("--f32", *f32,
                "Widen every tensor to F32 (BF16/MXFP4 exactly, FP8 as value x block scale, INT4 as bf16(q*s)): "
                "llama.cpp then computes without rounding activations, for checking its logits against "
                "sluice's (2-8x the bytes); required for FP8 and INT4 weights");
  return [model, out, quiet, f32] {
    gguf::ExportOptions opt;
    opt.widen_to_f32 = *f32;
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    if (!*quiet) {
      opt.progress = [&last](uint64_t done, uint64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (done < total && now - last < std::chrono::milliseconds(500)) return;
        last = now;
        std::fprintf(stderr, "\rexport-gguf: %9.1f / %9.1f MB", double(done) / 1e6, double(total) / 1e6);
        if (done >= total) std::fprintf(stderr, "\n");
      };
    }
    opt.note = [](const std::string& line) { std::fprintf(stderr, "export-gguf: %s\n", line.c_str()); };
    const gguf::ExportSummary s = gguf::export_gguf(*model, *out, opt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!*quiet)
      std::fprintf(stderr, "export-gguf: wrote %s (%s, %zu tensors, %zu keys, %.1f MB of tensor data) in %.1f s\n",
                   out->c_str(), s.architecture.c_str(), s.tensors, s.keys, double(s.data_bytes) / 1e6, secs);
    return 0;
  };
}

}  // namespace sluice::cli
