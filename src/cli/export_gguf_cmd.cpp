// `sluice export-gguf`: write a Kimi model directory as a GGUF file llama.cpp loads (the same
// weights, in llama.cpp's layout for kimi-k3 / kimi-linear).
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
      "Write a model as a GGUF file for llama.cpp (kimi_k3 -> kimi-k3, kimi_linear -> kimi-linear)");
  sub->footer(
      "The same weights in llama.cpp's layout, with the metadata keys, tensor names, shapes and tokenizer\n"
      "arrays its own converter writes: BF16 stays BF16, F32 stays F32, MXFP4 routed experts are repacked\n"
      "losslessly into ggml's MXFP4 blocks; norms, biases, the router and conv taps are widened exactly to\n"
      "F32 as llama.cpp reads them. Nothing is written as F16. The file is written to FILE.tmp and renamed\n"
      "when complete. A checkpoint feature llama.cpp's graph cannot express (for example grouped expert\n"
      "routing, or KDA and attention head counts that differ) is refused with an error naming it.");
  sub->add_option("--model", *model, "Model directory (config.json, safetensors, tiktoken.model)")->required();
  sub->add_option("--out", *out, "Output GGUF file")->required();
  sub->add_flag("--quiet", *quiet, "No progress on stderr");
  sub->add_flag("--f32", *f32,
                "Widen every tensor to F32 (exactly): llama.cpp then computes without rounding activations, "
                "for checking its logits against sluice's (2-8x the bytes)");
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
