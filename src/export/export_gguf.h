// `sluice export-gguf`: a checkpoint written as the GGUF file llama.cpp's own converter writes for
// it: kimi_k3 -> "kimi-k3", kimi_linear -> "kimi-linear", deepseek_v3 and kimi_k2 -> "deepseek2",
// qwen3_moe -> "qwen3moe", gpt_oss -> "gpt-oss"; the same metadata keys and types, tensor names and
// ggml shapes, and tokenizer arrays. Weights are not re-quantised: BF16 stays BF16, F32 stays F32,
// MXFP4 experts are repacked losslessly into ggml's block layout; small tensors llama.cpp reads as
// F32 (norms, biases, routers, sinks, conv taps) are widened exactly, and the few it stores
// transformed are transformed as its converter does (A_log as -exp(A_log), AttnRes norm x proj as
// one score vector, kv_b split into k_b and v_b, gpt-oss's interleaved gate/up taken apart). FP8
// and INT4 weights have no GGUF type there: they are exported only widened (--f32). What llama.cpp's
// graph for the architecture cannot express is refused by name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace sluice::gguf {

struct ExportOptions {
  // Called after each tensor with (bytes written, total bytes of tensor data).
  std::function<void(uint64_t, uint64_t)> progress;
  // Notes about approximations the format forces (one line each, no newline), given once the file
  // is written (a refused export gives none).
  std::function<void(const std::string&)> note;
  // Every tensor widened to F32 (exactly: BF16 and MXFP4 values are F32 values; FP8 is value x block
  // scale as one fp32 product, INT4 bf16(q·s)). llama.cpp then multiplies F32 by F32 without
  // rounding activations to BF16 or Q8_0, so its logits can be held to sluice's closely: a check of
  // the export's semantics, at 2x (BF16) to 8x (MXFP4) the bytes. The only way to export FP8 or INT4.
  bool widen_to_f32 = false;
};

struct ExportSummary {
  std::string architecture;  // llama.cpp's name: "kimi-k3", "kimi-linear", "deepseek2", "qwen3moe", "gpt-oss"
  size_t tensors = 0, keys = 0;
  uint64_t data_bytes = 0;
};

// Writes `out` (atomically: out.tmp, fsync, rename). Throws sluice::Error with a one-line message
// for a missing or malformed model directory, an architecture llama.cpp does not share, FP8 or INT4
// weights without widen_to_f32, or a feature of the checkpoint llama.cpp cannot express.
ExportSummary export_gguf(const std::string& model_dir, const std::string& out, const ExportOptions& opt = {});

}  // namespace sluice::gguf

namespace sluice::gguf {
// One row of `cols` MXFP4 values from sluice's layout (E2M1 codes two per byte, low nibble = even
// column; one E8M0 byte per 32 columns) into ggml's blocks (17 bytes per 32: the E8M0 byte, then
// qs[j] = code[j] | code[j + 16] << 4). Lossless: codes and scales are unchanged.
void repack_mxfp4_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint8_t* out);
}  // namespace sluice::gguf
