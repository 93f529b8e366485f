// The flags run and chat share, their checks and warnings.
#include "cli/model_flags.h"

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "cli/arg_lists.h"
#include "cli/state_cache_flags.h"
#include "cli/usage_error.h"
#include "core/parse_number.h"
#include "core/thread_pool.h"
#include "runtime/speculate/make_drafter.h"
#include "serve/chat_options.h"
#include "store/reader.h"
#include "store/streaming_experts.h"

namespace sluice::cli {
namespace {

bool given(const CLI::Option* o) { return o && o->count() > 0; }

// "--a", "--a and --b", "--a, --b and --c".
std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

void add_model_flags(CLI::App* sub, ModelFlags& f) {
  sub->add_option("--device", f.engine.device, runtime::device_help())->default_val("cpu");
  sub->add_option("--isa", f.isa, "Kernel ISA: scalar, avx2 or avx512 (default: best available; SLUICE_ISA)")
      ->check(one_of({"scalar", "avx2", "avx512"}));
  sub->add_option("--threads", f.threads,
                  "Compute threads (default: SLUICE_THREADS, else one per core)")
      ->transform(integer_in(1, 4096));
  sub->add_option("--experts", f.engine.experts,
                  "Where routed experts come from: auto (stream from the homes if `sluice prepare` ran), stream, resident")
      ->default_val("auto")
      ->check(one_of({"auto", "stream", "resident"}));
  f.cache_gb_opt = sub->add_option("--cache-gb", f.engine.cache_gb,
                                   "RAM budget of the expert cache when streaming (GB; at most the machine's memory, "
                                   "and never more is allocated than the expert bank needs)")
                       ->default_val(1.0)
                       ->transform(positive_number(1e6));
  f.gpu_experts_opt =
      sub->add_option("--gpu-experts-gb", f.engine.gpu_experts_gb,
                      "Device memory for routed experts in front of the RAM cache when streaming on a GPU: auto "
                      "(what is free after the model's resident part, less a fifth of the GPU's memory, at least "
                      "4 GiB, for scratch), 0 (off: each expert is copied from RAM at every use), or GB")
          ->default_val("auto");
  f.cpu_experts_opt =
      sub->add_option("--cpu-experts", f.engine.cpu_experts,
                      "Share of each MoE layer's routed experts that decode passes compute on the host's cores from "
                      "RAM while the GPU copies and computes the rest (--device cuda:N with the device tier): auto "
                      "(balanced by this machine's link and core rates, measured once and kept in "
                      "~/.cache/sluice/hybrid-rates.json; 0 when every expert fits in the tier) or 0..1. A plan "
                      "fixed by expert, never by what is cached: two runs give the same bits; those experts' outputs "
                      "are the CPU kernels', within the ISA tolerance of the GPU's")
          ->default_val("auto")
          ->transform(auto_or_number_in(0, 1));
  f.no_prefetch_opt = sub->add_flag("--no-prefetch", f.no_prefetch, "Do not predict the next layer's experts: no reads ahead into RAM, no copies ahead into GPU memory");
  f.prefetch_precision_opt =
      sub->add_option("--prefetch-precision", f.engine.stream.prefetch_min_precision,
                      "Pre-read a predicted expert (from drives into RAM, or from RAM into GPU memory) only if "
                      "predictions of its rank were right at least this often lately (0..1; 0 takes every "
                      "prediction). When the drives or the link are the bottleneck a wrong guess costs a whole "
                      "transfer and a right one saves little, hence the high default")
          ->default_val(0.95)
          ->transform(number_in(0, 1));
  sub->add_flag("--prefetch-idle", f.engine.stream.prefetch_when_idle,
                "Also pre-read next-layer predictions that have not earned --prefetch-precision when they "
                "arrive while no expert read is queued or in flight, as many as the drive time a layer leaves "
                "unused can read (drives that idle between layers: small experts, or compute a large share of "
                "a token; drives that are the bottleneck leave none)");
  f.prefetch_layers_opt =
      sub->add_option("--prefetch-layers", f.engine.stream.prefetch_layers,
                      cat("How many layers ahead to predict and pre-read experts (1..", store::kMaxPrefetchLayers,
                          "); guesses beyond the next layer are made and read only while the drives are idle, each "
                          "distance earning its own precision"))
          ->default_val(1)
          ->transform(integer_in(1, store::kMaxPrefetchLayers));
  f.reader_opt = sub->add_option("--reader", f.engine.stream.reader.engine, "Expert read engine: auto, io_uring or pread")
                     ->default_val("auto")
                     ->check(one_of({"auto", "io_uring", "pread"}));
  f.queue_depth_opt = sub->add_option("--queue-depth", f.engine.stream.reader.queue_depth, "Expert reads in flight per home")
                          ->default_val(4)
                          ->transform(integer_in(1, store::kMaxQueueDepth));
  f.no_verify_opt = sub->add_flag("--no-verify", f.no_verify, "Skip the xxh3 check of every expert read");
  sub->add_option("--draft", f.engine.draft, runtime::kDraftHelp)->default_val("off");
  f.draft_max_opt = sub->add_option("--draft-max", f.draft_max, "Most drafts per step (the controller picks the depth)")
                        ->default_val(8)
                        ->transform(integer_in(0, 64));
  f.draft_depth_opt = sub->add_option("--draft-depth", f.draft_depth, "Always draft this many (bypasses the controller)")
                          ->transform(integer_in(0, 64));
  sub->add_option("--max-context", f.max_context,
                  "Most tokens of prompt plus generated ones (a longer prompt is refused, generation is cut to fit)")
      ->default_val(int64_t(1) << 20)
      ->transform(integer_in(2, int64_t(1) << 30));
  sub->add_option("--prefill-chunk", f.prefill_chunk,
                  "Prompt positions per prefill pass (0 = as many as --prefill-memory-gb allows)")
      ->default_val(0)
      ->transform(integer_in(0, INT32_MAX));
  f.prefill_memory_opt = sub->add_option("--prefill-memory-gb", f.prefill_memory_gb, "Scratch memory a prefill pass may use (GB)")
                             ->default_val(2.0)
                             ->transform(positive_number(1e6));
  add_state_cache_flags(sub, f.engine);
  sub->add_flag("--no-progress", f.no_progress,
                "No prefill progress on stderr (shown once a prefill takes over a second: redrawn in place on a "
                "terminal, a plain line every 5 s otherwise)");
}

void add_sampling_flags(CLI::App* sub, ModelFlags& f) {
  sub->add_option("--temperature", f.sampling.temperature, "Sampling temperature (0 = greedy)")
      ->default_val(0.0)
      ->transform(number_in(0, 1e6));
  f.top_p_opt = sub->add_option("--top-p", f.sampling.top_p,
                                "Nucleus sampling mass: the fewest most likely tokens whose probabilities reach it "
                                "(1 = every token; with --temperature)")
                    ->default_val(1.0)
                    ->transform(positive_number(1));
  f.top_k_opt = sub->add_option("--top-k", f.sampling.top_k, "Sample among the k most likely tokens (0 = all; with --temperature)")
                    ->default_val(0)
                    ->transform(integer_in(0, INT32_MAX));
  f.seed_opt = sub->add_option("--seed", f.sampling.seed,
                               "Sampling seed (default: a random one, printed by --stats; give it to reproduce a run)")
                   ->transform(integer_in(0, INT64_MAX));
}

void add_chat_flags(CLI::App* sub, ModelFlags& f, const std::string& prefix) {
  // "With --chat: a system message" for run, "A system message" for chat.
  auto help = [&](std::string text) {
    if (prefix.empty()) text[0] = char(std::toupper(static_cast<unsigned char>(text[0])));
    return prefix + text;
  };
  f.chat_format_opt = sub->add_option("--chat-format", f.chat_format, kChatFormatHelp)->check(one_of(chat_format_names()));
  f.system_opt = sub->add_option("--system", f.system_prompt, help("a system message before the conversation"));
  f.no_think_opt = sub->add_flag("--no-think", f.no_think, help("thinking off (the reply starts in the answer; K3, Qwen3)"));
  f.reasoning_effort_opt =
      sub->add_option("--reasoning-effort", f.reasoning_effort,
                      help("Kimi K3's thinking effort (low, high, max) or gpt-oss's reasoning effort (low, medium, high)"))
          ->check(one_of({"low", "medium", "high", "max"}));
}

runtime::EngineOptions prepare_engine(ModelFlags& f) {
  if (!f.isa.empty() && f.engine.device != "cpu") usage_fail("give --isa or --device, not both");
  if (f.no_think && !f.reasoning_effort.empty()) usage_fail("give --no-think or --reasoning-effort, not both");
  if (f.threads > 0) {
    // The process-wide pool reads SLUICE_THREADS when it is first used, which is after this.
    ::setenv("SLUICE_THREADS", std::to_string(f.threads).c_str(), 1);
    if (ThreadPool::global().size() != f.threads)
      warn(cat("--threads ", f.threads, ": the thread pool was already running with ", ThreadPool::global().size()));
  }
  if (!f.sampling.greedy() && f.seed_opt->count() == 0) {
    // A seed the user can pass back to --seed (0..2^63-1) to repeat the run.
    std::random_device rd;
    f.sampling.seed = ((uint64_t(rd()) << 32) ^ uint64_t(rd())) & uint64_t(INT64_MAX);
    f.seed_drawn = true;
  }
  runtime::EngineOptions eo = f.engine;
  if (!f.isa.empty()) eo.device = "cpu:" + f.isa;  // --isa X is --device cpu:X
  eo.stream.prefetch = !f.no_prefetch;
  eo.stream.reader.verify = !f.no_verify;
  return eo;
}

void warn(const std::string& message) {
  std::fprintf(stderr, "sluice: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

void warn_unused_model_flags(const ModelFlags& f, const runtime::Engine* engine) {
  if (engine) {
    if (engine->streaming()) return;
    std::vector<std::string> names;
    for (const CLI::Option* o :
         {f.cache_gb_opt, f.gpu_experts_opt, f.cpu_experts_opt, f.no_prefetch_opt, f.prefetch_precision_opt, f.prefetch_layers_opt, f.reader_opt,
          f.queue_depth_opt, f.no_verify_opt})
      if (given(o)) names.push_back(o->get_name());
    if (!names.empty())
      warn(cat(join_names(names), names.size() == 1 ? " has" : " have",
               " no effect: the routed experts are not streamed (no `sluice prepare` manifest, --experts resident, "
               "or a model without routed experts)"));
    return;
  }
  if (f.sampling.greedy()) {
    std::vector<std::string> names;
    if (given(f.top_k_opt) && f.sampling.top_k != 0) names.push_back("--top-k");
    if (given(f.top_p_opt) && f.sampling.top_p != 1.0) names.push_back("--top-p");
    if (given(f.seed_opt)) names.push_back("--seed");
    if (!names.empty())
      warn(cat(join_names(names), names.size() == 1 ? " has" : " have",
               " no effect at --temperature 0 (greedy decoding)"));
  }
  if (f.engine.draft == "off") {
    std::vector<std::string> names;
    if (given(f.draft_max_opt)) names.push_back("--draft-max");
    if (given(f.draft_depth_opt)) names.push_back("--draft-depth");
    if (!names.empty()) warn(cat(join_names(names), names.size() == 1 ? " has" : " have", " no effect with --draft off"));
  } else if (given(f.draft_max_opt) && given(f.draft_depth_opt)) {
    warn("--draft-max has no effect with --draft-depth (a fixed depth bypasses the controller)");
  }
  if (f.prefill_chunk > 0 && given(f.prefill_memory_opt))
    warn("--prefill-memory-gb has no effect with --prefill-chunk (the chunk is given)");
  if (const char* env = std::getenv("SLUICE_THREADS"); env && f.threads == 0) {
    try {
      parse_integer(env, "SLUICE_THREADS", 1, 4096);
    } catch (const Error&) {
      // ThreadPool reads it with atoi: "lots" is 0, which means one thread, not one per core.
      const int n = ThreadPool::global().size();
      warn(cat("SLUICE_THREADS='", env, "' is not an integer in 1..4096; the thread pool runs ", n,
               n == 1 ? " thread" : " threads"));
    }
  }
}

runtime::GenerateOptions generate_options(const ModelFlags& f) {
  runtime::GenerateOptions opt;
  opt.prefill_chunk = f.prefill_chunk;
  opt.prefill_memory = f.prefill_memory_gb * 1e9;
  opt.sampling = f.sampling;
  opt.controller.max_depth = f.draft_max;
  opt.fixed_depth = f.draft_depth;
  return opt;
}

ChatSetup chat_setup(const runtime::Engine& engine, const ModelFlags& f) {
  const tokenizer::Tokenizer* tok = engine.tokenizer();
  const std::string& dir = f.engine.model_dir;
  if (!tok) fail(dir, ": no tokenizer (tiktoken.model or tokenizer.json) in the model directory; a chat needs one");
  std::optional<tokenizer::ChatFormat> format =
      f.chat_format.empty() ? tokenizer::detect_chat_format(*tok, tokenizer::read_chat_template(dir))
                            : tokenizer::chat_format_from_name(f.chat_format);
  if (!format)
    usage_fail(dir, ": the tokenizer has no chat special tokens (Kimi K3, Qwen3, DeepSeek-V3, Kimi K2 or gpt-oss); ",
               "give --chat-format");
  try {
    return chat_setup_for(*format, f.no_think ? "none" : f.reasoning_effort);
  } catch (const Error& e) {
    usage_fail(f.no_think ? "--no-think: " : "--reasoning-effort: ", e.what());
  }
}

ChatSetup chat_setup_for(tokenizer::ChatFormat format, const std::string& effort) {
  // The same per-format rules as the server's reasoning_effort ("none": thinking off).
  serve::ChatRequest request;
  request.reasoning_effort = effort;
  ChatSetup s{format, {}, false};
  try {
    s.options = serve::chat_options_for(format, request);
  } catch (const serve::ApiError& e) {
    fail("chat format ", tokenizer::chat_format_name(format), ": ", e.message);
  }
  s.opens_think = tokenizer::prompt_opens_think(format, s.options);
  return s;
}

std::string seed_text(const ModelFlags& f) {
  if (f.sampling.greedy()) return "";
  return cat("[stats] seed=", f.sampling.seed,
             f.seed_drawn ? " (drawn at random; --seed repeats this run)" : " (--seed)", "\n");
}

}  // namespace sluice::cli
