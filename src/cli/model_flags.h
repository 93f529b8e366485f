// The flags `run` and `chat` share (model and device, threads, expert streaming, drafting,
// prefill, sampling, the chat format) and what they mean once parsed: engine and generation
// options, a random seed when sampling without --seed, the chat format and its options, and a
// one-line warning on stderr for each flag given that has no effect.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "tokenizer/chat.h"

namespace sluice::cli {

struct ModelFlags {
  runtime::EngineOptions engine;
  std::string isa;
  int threads = 0;  // 0: SLUICE_THREADS, else one per core
  bool no_prefetch = false, no_verify = false;
  int64_t prefill_chunk = 0, max_context = int64_t(1) << 20;
  double prefill_memory_gb = 2.0;
  bool no_progress = false;
  int draft_max = 8, draft_depth = -1;
  runtime::SamplingParams sampling;
  bool seed_drawn = false;  // sampling without --seed: prepare_engine() drew one
  std::string chat_format, reasoning_effort, system_prompt;
  bool no_think = false;

  // The options as declared, to tell a flag given from its default.
  CLI::Option *top_k_opt = nullptr, *top_p_opt = nullptr, *seed_opt = nullptr, *draft_max_opt = nullptr,
              *draft_depth_opt = nullptr, *prefill_memory_opt = nullptr, *cache_gb_opt = nullptr, *gpu_experts_opt = nullptr, *cpu_experts_opt = nullptr,
              *no_prefetch_opt = nullptr, *prefetch_precision_opt = nullptr, *prefetch_layers_opt = nullptr,
              *reader_opt = nullptr, *queue_depth_opt = nullptr, *no_verify_opt = nullptr,
              *chat_format_opt = nullptr, *reasoning_effort_opt = nullptr, *system_opt = nullptr,
              *no_think_opt = nullptr;
};

// --device, --isa, --threads, --experts, --cache-gb, --no-prefetch, --prefetch-precision,
// --prefetch-layers, --reader, --queue-depth, --no-verify, --draft, --draft-max, --draft-depth, --max-context,
// --prefill-chunk, --prefill-memory-gb, --no-progress.
void add_model_flags(CLI::App* sub, ModelFlags& f);
// --temperature, --top-p, --top-k, --seed.
void add_sampling_flags(CLI::App* sub, ModelFlags& f);
// --chat-format, --system, --no-think, --reasoning-effort; `prefix` leads each help text ("With
// --chat: " for run).
void add_chat_flags(CLI::App* sub, ModelFlags& f, const std::string& prefix);

// Before Engine::load: refuses conflicting flags (UsageError), applies --threads, draws a seed
// when sampling without --seed, and returns the engine's options.
runtime::EngineOptions prepare_engine(ModelFlags& f);

// Prints "sluice: warning: ..." (one line) on stderr.
void warn(const std::string& message);
// Warnings for flags given that have no effect: sampling flags at temperature 0, drafting flags
// without a drafter, --prefill-memory-gb with --prefill-chunk, streaming flags when the experts are
// resident (`engine` loaded; null: not checked yet), a malformed SLUICE_THREADS.
void warn_unused_model_flags(const ModelFlags& f, const runtime::Engine* engine);

// The generation options the flags ask for (max_new, cancel and callbacks are the caller's).
runtime::GenerateOptions generate_options(const ModelFlags& f);

// The chat format (--chat-format, else detected from the model) and its options (reasoning effort
// or thinking off, the same per-format rules as the server's reasoning_effort). Throws UsageError
// when the model has no chat format or the format cannot express the options.
struct ChatSetup {
  tokenizer::ChatFormat format;
  tokenizer::ChatOptions options;
  bool opens_think = false;  // the rendered prompt ends inside a reasoning block
};
ChatSetup chat_setup(const runtime::Engine& engine, const ModelFlags& f);
// The setup of `format` with a reasoning effort as the server takes it ("" the format's default,
// "none" thinking off); throws sluice::Error naming what the format refuses.
ChatSetup chat_setup_for(tokenizer::ChatFormat format, const std::string& effort);

// The --stats lines on the seed: "[stats] seed=N" and whether it was drawn ("" when greedy).
std::string seed_text(const ModelFlags& f);

}  // namespace sluice::cli
