// `sluice run`: load a model and generate greedily from prompt token ids (or text, with the
// model's tokenizer). --json prints exactly one JSON object on stdout (a stable contract).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "core/error.h"
#include "model/registry.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "serve/chat_options.h"
#include "store/reader.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "runtime/speculate/make_drafter.h"

namespace sluice::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (int64_t v : parse_int_list(text, "--prompt-ids", 0)) ids.push_back(int32_t(v));
  return ids;
}

// Set by SIGINT/SIGTERM while generating; the generation loop stops at its next check.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

extern "C" void on_interrupt(int sig) {
  g_signal.store(sig);
  g_interrupted.store(true);
}

// Routes SIGINT and SIGTERM to g_interrupted while alive. SA_RESETHAND: a second Ctrl-C while the
// first is being honoured ends the process the ordinary way. A signal the parent set to be
// ignored (a background job of a script ignores SIGINT) stays ignored.
class InterruptScope {
 public:
  InterruptScope() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(SIGINT, nullptr, &old_int_);
    ::sigaction(SIGTERM, nullptr, &old_term_);
    if (old_int_.sa_handler != SIG_IGN) ::sigaction(SIGINT, &sa, nullptr);
    if (old_term_.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &sa, nullptr);
  }
  ~InterruptScope() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

struct RunArgs {
  runtime::EngineOptions engine;
  std::string prompt_ids, prompt_text, events;
  bool chat = false, no_think = false;
  std::string chat_format, reasoning_effort, system_prompt;
  int64_t max_new = 32, prefill_chunk = 0, max_context = int64_t(1) << 20;
  double prefill_memory_gb = 2.0;
  bool stats = false, json = false, no_eos = false, no_prefetch = false, no_verify = false;
  std::string isa;
  int draft_max = 8, draft_depth = -1;
  int top_logits = 0;
  runtime::SamplingParams sampling;
};

// JSON-lines event log (--events): run_start, prefill_done, decode_step per token, run_end.
class EventLog {
 public:
  explicit EventLog(const std::string& path) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "w");
    if (!f_) fail("--events ", path, ": cannot create");
  }
  ~EventLog() {
    if (f_) std::fclose(f_);
  }
  void emit(const nlohmann::json& j) {
    if (!f_) return;
    std::fprintf(f_, "%s\n", j.dump().c_str());
    std::fflush(f_);
  }

 private:
  std::FILE* f_ = nullptr;
};

int run(const RunArgs& a) {
  if (!a.isa.empty() && a.engine.device != "cpu") fail("give --isa or --device, not both");
  if (a.prompt_ids.empty() == a.prompt_text.empty()) fail("give exactly one of --prompt TEXT and --prompt-ids IDS");
  if (a.chat && a.prompt_text.empty()) fail("--chat needs --prompt TEXT");
  runtime::EngineOptions eo = a.engine;
  if (!a.isa.empty()) eo.device = "cpu:" + a.isa;  // --isa X is --device cpu:X
  eo.prefetch = !a.no_prefetch;
  eo.verify_reads = !a.no_verify;
  auto engine = runtime::Engine::load(eo);
  // The model's tokenizer (when it has one) turns text into ids and generated ids into text.
  const tokenizer::Tokenizer* tok = engine->tokenizer();
  if (!a.prompt_text.empty() && !tok)
    fail(a.engine.model_dir, ": --prompt needs a tokenizer (tiktoken.model or tokenizer.json) in the model directory");
  std::vector<int32_t> prompt;
  std::optional<tokenizer::ChatFormat> chat_format;
  tokenizer::ChatOptions chat_options;
  // A prompt must leave room for one generated token; text stops being encoded once it cannot.
  const size_t max_prompt = size_t(a.max_context - 1);
  bool too_long = false;
  if (!a.prompt_ids.empty()) {
    prompt = parse_ids(a.prompt_ids);
    too_long = prompt.size() > max_prompt;
  } else if (a.chat) {
    chat_format = a.chat_format.empty()
                      ? tokenizer::detect_chat_format(*tok, tokenizer::read_chat_template(a.engine.model_dir))
                      : tokenizer::chat_format_from_name(a.chat_format);
    if (!chat_format)
      fail(a.engine.model_dir, ": --chat: the tokenizer has no chat special tokens (Kimi K3, Qwen3, DeepSeek-V3, ",
           "Kimi K2 or gpt-oss); give --chat-format");
    tokenizer::ChatJson messages = tokenizer::ChatJson::array();
    if (!a.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", a.system_prompt}});
    messages.push_back({{"role", "user"}, {"content", a.prompt_text}});
    // The same per-format rules as the server's reasoning_effort ("none" is --no-think).
    serve::ChatRequest request;
    request.reasoning_effort = a.no_think ? "none" : a.reasoning_effort;
    if (a.no_think && !a.reasoning_effort.empty()) fail("give --no-think or --reasoning-effort, not both");
    try {
      chat_options = serve::chat_options_for(*chat_format, request);
    } catch (const serve::ApiError& e) {
      fail("--chat (", tokenizer::chat_format_name(*chat_format), "): ",
           a.no_think ? "--no-think: " : "--reasoning-effort: ", e.message);
    }
    chat_options.max_ids = max_prompt;
    tokenizer::RenderedChat rendered = tokenizer::render_chat(*tok, *chat_format, messages, chat_options);
    prompt = std::move(rendered.ids);
    too_long = rendered.too_long;
  } else {
    too_long = !tok->encode_into_at_most(a.prompt_text, prompt, max_prompt);
    if (prompt.empty() && !too_long) fail("--prompt: the text encodes to no tokens");
  }
  if (too_long)
    fail("the prompt has more than ", max_prompt, " tokens: --max-context ", a.max_context,
         " leaves room for at most that many before the first generated token");
  auto session = engine->new_session(/*reuse_state=*/false);
  runtime::Drafter* drafter = engine->drafter();
  EventLog events(a.events);
  using clock = std::chrono::steady_clock;
  auto t_start = clock::now();
  events.emit({{"event", "run_start"},
               {"model", eo.model_dir},
               {"prompt_ids", prompt},
               {"max_new", a.max_new},
               {"experts", engine->streaming() ? "stream" : "resident"},
               {"cache_gb", eo.cache_gb},
               {"prefetch", eo.prefetch},
               {"device", engine->device().name()},
               {"eos_token_id", engine->info().eos_token_id()}});
  uint64_t bytes_before = 0;
  runtime::GenerateOptions opt;
  opt.max_new = std::min<int64_t>(a.max_new, a.max_context - int64_t(prompt.size()));
  opt.prefill_chunk = a.prefill_chunk;
  opt.prefill_memory = a.prefill_memory_gb * 1e9;
  opt.stop_at_eos = !a.no_eos;
  opt.sampling = a.sampling;
  opt.controller.max_depth = a.draft_max;
  opt.fixed_depth = a.draft_depth;
  // Text output streams as tokens are decided: incomplete UTF-8 is held back; in chat mode the
  // reply is split into reasoning and answer, and markers never reach the terminal.
  tokenizer::Utf8StreamDecoder utf8;
  std::unique_ptr<tokenizer::ReplyStream> reply;
  if (chat_format)
    reply = std::make_unique<tokenizer::ReplyStream>(*tok, *chat_format,
                                                     tokenizer::prompt_opens_think(*chat_format, chat_options));
  bool in_content = false, printed_reasoning = false;
  auto print_delta = [&](const tokenizer::ReplyStream::Delta& d) {
    if (!d.reasoning.empty()) std::printf("%s", d.reasoning.c_str());
    printed_reasoning = printed_reasoning || !d.reasoning.empty();
    if (!d.content.empty()) {
      if (!in_content && printed_reasoning) std::printf("\n--- answer ---\n");
      in_content = true;
      std::printf("%s", d.content.c_str());
    }
  };
  auto on_token = [&](int32_t id) {
    if (tok && !a.prompt_text.empty()) {
      if (reply) {
        // --json reports the split reply at the end, so the parser sees every token either way.
        tokenizer::ReplyStream::Delta d = reply->push(std::span<const int32_t>(&id, 1));
        if (!a.json) print_delta(d);
      } else if (a.json) {
        return;
      } else if (!tok->is_special(id)) {
        std::string out = utf8.push(tok->token_bytes(id));
        std::printf("%s", out.c_str());
      }
    } else if (!a.json) {
      std::printf("%d ", id);
    }
    std::fflush(stdout);
  };
  auto on_step = [&](const runtime::StepInfo& s) {
    uint64_t bytes = engine->store() ? engine->store()->counters().bytes_read : 0;
    bool first = s.decision == "prefill";
    events.emit({{"event", first ? "prefill_done" : "decode_step"},
                 {"duration_ms", s.ms},
                 {"t_ms", std::chrono::duration<double, std::milli>(clock::now() - t_start).count()},
                 {"emitted", s.emitted},
                 {"proposed", s.proposed},
                 {"accepted", s.accepted},
                 {"expert_bytes_read", bytes - bytes_before},
                 {"union_experts", s.union_experts},
                 {"missed_experts", s.missed_experts},
                 {"expert_requests", engine->model().counters().expert_requests}});
    bytes_before = bytes;
    if (a.stats && drafter && !first)
      std::fprintf(stderr, "[draft] %s: proposed %d accepted %d in %.2f ms; union %llu experts, %llu read (%.1f KB)\n",
                   s.decision.c_str(), s.proposed, s.accepted, s.ms, (unsigned long long)s.union_experts,
                   (unsigned long long)s.missed_experts, double(s.bytes_read) / 1e3);
  };
  opt.cancel = &g_interrupted;
  // --top-logits K: the K highest logits each token was chosen from, for comparing engines.
  nlohmann::json top_logits = nlohmann::json::array();
  if (a.top_logits > 0) {
    if (drafter) fail("--top-logits needs --draft off (a verify pass chooses several tokens at once)");
    if (!a.json) fail("--top-logits needs --json (the logits are part of its object)");
    opt.on_logits = [&](const float* logits, int64_t V) {
      std::vector<int32_t> ids(static_cast<size_t>(V));
      for (int64_t i = 0; i < V; ++i) ids[size_t(i)] = int32_t(i);
      const size_t k = std::min<size_t>(size_t(a.top_logits), ids.size());
      std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t x, int32_t y) {
        return logits[x] != logits[y] ? logits[x] > logits[y] : x < y;
      });
      nlohmann::json step = nlohmann::json::array();
      for (size_t i = 0; i < k; ++i) step.push_back({ids[i], logits[ids[i]]});
      top_logits.push_back(std::move(step));
    };
  }
  runtime::GenerateResult r;
  {
    InterruptScope interrupts;
    r = session->generate(prompt, opt, on_token, on_step);
  }
  const bool interrupted = r.stop_reason == "cancelled";
  events.emit({{"event", "run_end"},
               {"status", interrupted ? "interrupted" : "ok"},
               {"stop_reason", r.stop_reason},
               {"prompt_ids", prompt},
               {"completion_ids", r.generated},
               {"prefill_ms", r.prefill_ms},
               {"decode_ms", r.decode_ms},
               {"wall_ms", std::chrono::duration<double, std::milli>(clock::now() - t_start).count()},
               {"stats", engine->stats_json()}});
  if (a.json) {
    nlohmann::json j = {{"prompt_ids", prompt},
                        {"generated_ids", r.generated},
                        {"prefill_ms", r.prefill_ms},
                        {"decode_ms", r.decode_ms},
                        {"stop_reason", r.stop_reason},
                        {"steps", r.steps},
                        {"proposed", r.proposed},
                        {"accepted", r.accepted}};
    if (tok) j["text"] = tokenizer::utf8_replace_invalid(tok->decode(r.generated));
    if (reply) {
      // The reply split as the server reports it.
      tokenizer::ParsedReply parsed = reply->finish();
      j["reasoning"] = tokenizer::utf8_replace_invalid(parsed.reasoning);
      j["content"] = tokenizer::utf8_replace_invalid(parsed.content);
      j["tool_calls"] = nlohmann::json::array();
      for (const auto& c : parsed.tool_calls)
        j["tool_calls"].push_back({{"id", tokenizer::utf8_replace_invalid(c.id)},
                                   {"name", tokenizer::utf8_replace_invalid(c.name)},
                                   {"arguments", tokenizer::utf8_replace_invalid(c.arguments)}});
    }
    if (a.top_logits > 0) j["top_logits"] = std::move(top_logits);
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (reply) {
      print_delta(reply->flush());
      for (const auto& c : reply->finish().tool_calls)
        std::printf("\n--- tool call %s ---\n%s", tokenizer::utf8_replace_invalid(c.name).c_str(),
                    tokenizer::utf8_replace_invalid(c.arguments).c_str());
    }
    else if (tok && !a.prompt_text.empty()) std::printf("%s", utf8.finish().c_str());
    std::printf("\n");
  }
  std::fflush(stdout);
  if (a.stats) {
    double decode_tokens = double(r.generated.size() > 0 ? r.generated.size() - 1 : 0);
    std::fprintf(stderr, "[stats] prompt=%zu generated=%zu prefill=%.1f ms (%.1f tok/s) decode=%.1f ms (%.2f tok/s) stop=%s\n",
                 prompt.size(), r.generated.size(), r.prefill_ms, prompt.size() * 1000.0 / std::max(r.prefill_ms, 1e-9),
                 r.decode_ms, decode_tokens * 1000.0 / std::max(r.decode_ms, 1e-9), r.stop_reason.c_str());
    if (drafter)
      std::fprintf(stderr, "[draft] drafter=%s steps=%lld proposed=%lld accepted=%lld (%.1f%%) tokens/step=%.2f\n",
                   drafter->name(), (long long)r.steps, (long long)r.proposed, (long long)r.accepted,
                   r.proposed ? 100.0 * r.accepted / r.proposed : 0.0,
                   r.steps ? double(r.generated.size() - 1) / double(r.steps) : 0.0);
    std::fprintf(stderr, "%s", engine->stats_text(int64_t(r.generated.size())).c_str());
  }
  if (interrupted) {
    // What was generated is on stdout already (with --json: the partial object, stop_reason
    // "cancelled"); 130 is the shell's status for a command ended by Ctrl-C.
    std::fprintf(stderr, "sluice: interrupted by %s after %zu generated tokens\n",
                 g_signal.load() == SIGTERM ? "SIGTERM" : "SIGINT", r.generated.size());
    return 130;
  }
  return 0;
}

}  // namespace

Action register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "Generate from a prompt with a model directory (kimi_k3, kimi_linear, qwen3)");
  sub->add_option("--model", a->engine.model_dir, "Model directory (config.json + safetensors)")->required();
  auto* ids_opt = sub->add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids, e.g. 1,2,3");
  sub->add_option("--prompt", a->prompt_text, "Prompt text (encoded with the model's tokenizer)")->excludes(ids_opt);
  sub->add_flag("--chat", a->chat,
                "Render --prompt as one user message in the model's chat format (Kimi K3, Qwen3, DeepSeek-V3, Kimi K2, "
                "gpt-oss)");
  sub->add_option("--chat-format", a->chat_format, kChatFormatHelp)->check(one_of(chat_format_names()));
  sub->add_option("--system", a->system_prompt, "With --chat: a system message before the user message");
  sub->add_flag("--no-think", a->no_think, "With --chat: thinking off (the reply starts in the answer; K3, Qwen3)");
  sub->add_option("--reasoning-effort", a->reasoning_effort,
                  "With --chat: Kimi K3's thinking effort (low, high, max) or gpt-oss's reasoning effort (low, medium, "
                  "high)")
      ->check(one_of({"low", "medium", "high", "max"}));
  sub->add_option("--max-new", a->max_new, "Maximum number of tokens to generate")->default_val(32)->transform(integer_in(0, INT32_MAX));
  sub->add_option("--max-context", a->max_context,
                  "Most tokens of prompt plus generated ones (a longer prompt is refused, --max-new is cut to fit)")
      ->default_val(int64_t(1) << 20)
      ->transform(integer_in(2, int64_t(1) << 30));
  sub->add_option("--prefill-chunk", a->prefill_chunk,
                  "Prompt positions per prefill pass (0 = as many as --prefill-memory-gb allows)")
      ->default_val(0)
      ->transform(integer_in(0, INT32_MAX));
  sub->add_option("--prefill-memory-gb", a->prefill_memory_gb, "Scratch memory a prefill pass may use (GB)")
      ->default_val(2.0)
      ->transform(positive_number(1e6));
  sub->add_flag("--stats", a->stats, "Print timing and expert counters to stderr");
  sub->add_flag("--json", a->json,
                "Print one JSON object on stdout: prompt_ids, generated_ids, prefill_ms, decode_ms, stop_reason");
  sub->add_flag("--ignore-eos", a->no_eos, "Keep generating past the end-of-sequence token");
  sub->add_option("--top-logits", a->top_logits,
                  "With --json: add top_logits, the K highest [id, logit] pairs each token was chosen from (drafting off)")
      ->transform(integer_in(1, 1000));
  sub->add_option("--isa", a->isa, "Kernel ISA: scalar, avx2 or avx512 (default: best available)")
      ->check(one_of({"scalar", "avx2", "avx512"}));
  sub->add_option("--device", a->engine.device, runtime::kDeviceHelp)->default_val("cpu");
  sub->add_option("--experts", a->engine.experts,
                  "Where routed experts come from: auto (stream from the homes if `sluice prepare` ran), stream, resident")
      ->default_val("auto")
      ->check(one_of({"auto", "stream", "resident"}));
  sub->add_option("--cache-gb", a->engine.cache_gb,
                  "RAM budget of the expert cache when streaming (GB; at most the machine's memory, and never more "
                  "is allocated than the expert bank needs)")
      ->default_val(1.0)
      ->transform(positive_number(1e6));
  sub->add_flag("--no-prefetch", a->no_prefetch, "Do not predict and pre-read the next layer's experts");
  sub->add_option("--reader", a->engine.reader, "Expert read engine: auto, io_uring or pread")
      ->default_val("auto")
      ->check(one_of({"auto", "io_uring", "pread"}));
  sub->add_option("--queue-depth", a->engine.queue_depth, "Expert reads in flight per home")
      ->default_val(4)
      ->transform(integer_in(1, store::kMaxQueueDepth));
  sub->add_flag("--no-verify", a->no_verify, "Skip the xxh3 check of every expert read");
  sub->add_option("--draft", a->engine.draft, runtime::kDraftHelp)->default_val("off");
  sub->add_option("--draft-max", a->draft_max, "Most drafts per step (the controller picks the depth)")
      ->default_val(8)->transform(integer_in(0, 64));
  sub->add_option("--draft-depth", a->draft_depth, "Always draft this many (bypasses the controller)")
      ->transform(integer_in(0, 64));
  sub->add_option("--temperature", a->sampling.temperature, "Sampling temperature (0 = greedy)")
      ->default_val(0.0)
      ->transform(number_in(0, 1e6));
  sub->add_option("--top-p", a->sampling.top_p, "Nucleus sampling mass")->default_val(1.0)->transform(positive_number(1));
  sub->add_option("--top-k", a->sampling.top_k, "Sample among the k most likely tokens (0 = all)")
      ->default_val(0)
      ->transform(integer_in(0, INT32_MAX));
  sub->add_option("--seed", a->sampling.seed, "Sampling seed")->default_val(0)->transform(integer_in(0, INT64_MAX));
  sub->add_option("--router-trace", a->engine.router_trace,
                  "Record every routed-expert request (layer, experts) as JSON lines, for `sluice warm`");
  sub->add_option("--events", a->events, "Write a JSON-lines event log (run_start, prefill_done, decode_step, run_end)");
  return [a] { return run(*a); };
}

}  // namespace sluice::cli
