// `sluice run`: load a model and generate from prompt token ids or text (from the command line,
// a file or stdin; --chat renders it as one user message in the model's chat format). --json
// prints exactly one JSON object on stdout (a stable contract).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/prefill_progress.h"
#include "cli/usage_error.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/thread_pool.h"
#include "guide/json_schema.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/grammar_constraint.h"
#include "runtime/guided_reply.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

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
  ModelFlags model;
  std::string prompt_ids, prompt_text, prompt_file, events;
  bool chat = false;
  int64_t max_new = 32;
  std::string stats;  // "", "summary" or "verbose"
  bool json = false, no_eos = false;
  int top_logits = 0;
  // Guided decoding: at most one of these.
  std::string grammar_file, json_schema_file;
  bool json_object = false;
};

// The grammar --grammar-file, --json-schema or --json-object asks for, or null: over the whole
// output of a raw prompt, or over the answer of a --chat reply (its reasoning stays free).
std::unique_ptr<runtime::GrammarConstraint> guided_constraint(const RunArgs& a, runtime::Engine& engine,
                                                              const std::optional<ChatSetup>& chat) {
  if (a.grammar_file.empty() && a.json_schema_file.empty() && !a.json_object) return nullptr;
  const std::string flag = !a.grammar_file.empty()       ? "--grammar-file " + a.grammar_file
                           : !a.json_schema_file.empty() ? "--json-schema " + a.json_schema_file
                                                         : std::string("--json-object");
  try {
    runtime::GuidedReply g;
    if (!a.grammar_file.empty()) {
      if (chat) usage_fail("--grammar-file applies to the raw output; with --chat give --json-schema or --json-object");
      g.grammar = std::make_shared<const guide::Grammar>(guide::parse_gbnf(read_regular_file(a.grammar_file)));
    } else {
      std::string content;
      if (a.json_object) {
        content = guide::json_any_object_gbnf(chat ? "content-" : "");
      } else {
        const auto schema = nlohmann::ordered_json::parse(read_regular_file(a.json_schema_file), nullptr, false);
        if (schema.is_discarded()) fail("not valid JSON");
        content = guide::json_schema_gbnf(schema, chat ? "content-" : "");
      }
      if (chat)
        g = runtime::guided_reply(*engine.tokenizer(), chat->format, chat->options.thinking, content);
      else
        g.grammar = std::make_shared<const guide::Grammar>(guide::parse_gbnf(content));
    }
    return std::make_unique<runtime::GrammarConstraint>(engine.guide_vocabulary(), g.grammar,
                                                        engine.info().eos_token_ids, g.starts_after);
  } catch (const Error& e) {
    fail(flag, ": ", e.what());
  }
}

// The most prompt text read from a file or stdin: far above any context (a million tokens are a
// few MB of text), low enough that a wrong path (a disk image, /dev/zero) fails fast.
constexpr size_t kMaxPromptBytes = size_t(1) << 30;

// The text of --prompt-file FILE or --prompt - (stdin), without one final newline (editors and
// `echo` end a file with one; it is not part of the prompt).
std::string read_prompt(const std::string& path) {
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "--prompt -: stdin" : "--prompt-file " + path;
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) fail(name, ": cannot open: ", std::strerror(errno));
  if (from_stdin && ::isatty(0)) std::fprintf(stderr, "sluice: reading the prompt from stdin (end it with Ctrl-D)\n");
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (text.size() + n > kMaxPromptBytes) {
      if (!from_stdin) std::fclose(f);
      fail(name, ": more than ", kMaxPromptBytes >> 20, " MiB of prompt text");
    }
    text.append(buf, n);
  }
  const bool bad = std::ferror(f);
  const int err = errno;
  if (!from_stdin) std::fclose(f);
  if (bad) fail(name, ": read failed: ", std::strerror(err));
  if (text.ends_with("\r\n"))
    text.resize(text.size() - 2);
  else if (text.ends_with("\n"))
    text.pop_back();
  if (text.empty()) fail(name, ": the prompt is empty");
  return text;
}

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
  // Whether events are written: callers build an event only then (a decode step's object is a few
  // dozen allocations, which nothing else in the loop makes).
  bool enabled() const { return f_ != nullptr; }
  void emit(const nlohmann::json& j) {
    if (!f_) return;
    std::fprintf(f_, "%s\n", j.dump().c_str());
    std::fflush(f_);
  }

 private:
  std::FILE* f_ = nullptr;
};

// Flags that do nothing in this invocation: one warning line each.
void warn_unused_run_flags(const RunArgs& a) {
  if (!a.chat)
    for (const CLI::Option* o : {a.model.chat_format_opt, a.model.system_opt, a.model.no_think_opt,
                                 a.model.reasoning_effort_opt})
      if (o->count() > 0) warn(o->get_name() + " has no effect without --chat");
  warn_unused_model_flags(a.model, nullptr);
}

int run(RunArgs& a) {
  const int sources = int(!a.prompt_ids.empty()) + int(!a.prompt_text.empty()) + int(!a.prompt_file.empty());
  if (sources != 1) usage_fail("give exactly one of --prompt TEXT, --prompt-file FILE and --prompt-ids IDS");
  if (a.chat && !a.prompt_ids.empty()) usage_fail("--chat needs a text prompt (--prompt or --prompt-file)");
  if (a.top_logits > 0 && a.model.engine.draft != "off")
    usage_fail("--top-logits needs --draft off (a verify pass chooses several tokens at once)");
  if (a.top_logits > 0 && !a.json) usage_fail("--top-logits needs --json (the logits are part of its object)");
  runtime::EngineOptions eo = prepare_engine(a.model);
  warn_unused_run_flags(a);
  // The prompt is read before the model loads: a wrong path fails in milliseconds.
  if (a.prompt_text == "-") a.prompt_text = read_prompt("-");
  if (!a.prompt_file.empty()) a.prompt_text = read_prompt(a.prompt_file);
  auto engine = runtime::Engine::load(eo);
  warn_unused_model_flags(a.model, engine.get());
  // The model's tokenizer (when it has one) turns text into ids and generated ids into text.
  const tokenizer::Tokenizer* tok = engine->tokenizer();
  if (!a.prompt_text.empty() && !tok)
    fail(eo.model_dir, ": --prompt needs a tokenizer (tiktoken.model or tokenizer.json) in the model directory");
  std::vector<int32_t> prompt;
  std::optional<ChatSetup> chat;
  // A prompt must leave room for one generated token; text stops being encoded once it cannot.
  const int64_t max_context = a.model.max_context;
  const size_t max_prompt = size_t(max_context - 1);
  bool too_long = false;
  if (!a.prompt_ids.empty()) {
    prompt = parse_ids(a.prompt_ids);
    too_long = prompt.size() > max_prompt;
  } else if (a.chat) {
    chat = chat_setup(*engine, a.model);
    tokenizer::ChatJson messages = tokenizer::ChatJson::array();
    if (!a.model.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", a.model.system_prompt}});
    messages.push_back({{"role", "user"}, {"content", a.prompt_text}});
    chat->options.max_ids = max_prompt;
    tokenizer::RenderedChat rendered = tokenizer::render_chat(*tok, chat->format, messages, chat->options);
    prompt = std::move(rendered.ids);
    too_long = rendered.too_long;
  } else {
    too_long = !tok->encode_into_at_most(a.prompt_text, prompt, max_prompt);
    if (prompt.empty() && !too_long) fail("--prompt: the text encodes to no tokens");
  }
  if (too_long)
    fail("the prompt has more than ", max_prompt, " tokens: --max-context ", max_context,
         " leaves room for at most that many before the first generated token");
  // A fresh session: reusing state only matters through --state-cache (a saved prefix of this prompt).
  auto session = engine->new_session(/*reuse_state=*/true);
  runtime::Drafter* drafter = engine->drafter();
  EventLog events(a.events);
  using clock = std::chrono::steady_clock;
  auto t_start = clock::now();
  nlohmann::json start = {{"event", "run_start"},
                          {"model", eo.model_dir},
                          {"prompt_ids", prompt},
                          {"max_new", a.max_new},
                          {"experts", engine->streaming() ? "stream" : "resident"},
                          {"cache_gb", eo.cache_gb},
                          {"prefetch", eo.stream.prefetch},
                          {"device", engine->device().name()},
                          {"eos_token_id", engine->info().eos_token_id()}};
  if (!a.model.sampling.greedy()) start["seed"] = a.model.sampling.seed;
  events.emit(start);
  uint64_t bytes_before = 0;
  store::TierCounters tier_before;  // the GPU tier's counters at the previous step (when there is one)
  // The device's count of floating-point operations (Device::flops) spent by the prefill.
  const uint64_t flops_at_start = engine->device().flops();
  uint64_t prefill_flops = 0;
  runtime::GenerateOptions opt = generate_options(a.model);
  std::unique_ptr<runtime::GrammarConstraint> constraint = guided_constraint(a, *engine, chat);
  opt.constraint = constraint.get();
  opt.max_new = std::min<int64_t>(a.max_new, max_context - int64_t(prompt.size()));
  opt.stop_at_eos = !a.no_eos;
  PrefillProgress progress(!a.model.no_progress);
  opt.on_prefill = [&](int64_t done, int64_t total) { progress.update(done, total); };
  // Text output streams as tokens are decided: incomplete UTF-8 is held back; in chat mode the
  // reply is split into reasoning and answer, and markers never reach the terminal.
  tokenizer::Utf8StreamDecoder utf8;
  std::unique_ptr<tokenizer::ReplyStream> reply;
  if (chat) reply = std::make_unique<tokenizer::ReplyStream>(*tok, chat->format, chat->opens_think);
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
    progress.finish();
    if (tok && !a.prompt_text.empty()) {
      if (reply) {
        // --json reports the split reply at the end, so the parser sees every token either way.
        tokenizer::ReplyStream::Delta d = reply->push(std::span<const int32_t>(&id, 1));
        if (!a.json) print_delta(d);
      } else if (a.json) {
        return;
      } else if (!tok->is_special(id)) {
        std::string out = utf8.push(tok->generated_bytes(id));
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
    if (first) prefill_flops = engine->device().flops() - flops_at_start;
    if (events.enabled()) {
      nlohmann::json e = {{"event", first ? "prefill_done" : "decode_step"},
                          {"duration_ms", s.ms},
                          {"t_ms", std::chrono::duration<double, std::milli>(clock::now() - t_start).count()},
                          {"emitted", s.emitted},
                          {"proposed", s.proposed},
                          {"accepted", s.accepted},
                          {"expert_bytes_read", bytes - bytes_before},
                          {"union_experts", s.union_experts},
                          {"missed_experts", s.missed_experts},
                          {"expert_requests", engine->model().counters().expert_requests}};
      if (const store::DeviceTier* tier = engine->tier()) {  // this step's share of the GPU tier's work
        const store::TierCounters& t = tier->counters();
        e["gpu_tier"] = {{"requests", t.requests - tier_before.requests},
                         {"hits", t.hits - tier_before.hits},
                         {"bytes_copied", t.bytes_copied - tier_before.bytes_copied},
                         {"on_host", t.on_host - tier_before.on_host}};
        tier_before = t;
      }
      events.emit(e);
    }
    bytes_before = bytes;
    if (a.stats == "verbose" && !first) {
      if (drafter)
        std::fprintf(stderr, "[draft] %s: proposed %d accepted %d in %.2f ms; union %llu experts, %llu read (%.1f KB)\n",
                     s.decision.c_str(), s.proposed, s.accepted, s.ms, (unsigned long long)s.union_experts,
                     (unsigned long long)s.missed_experts, double(s.bytes_read) / 1e3);
      else
        std::fprintf(stderr, "[step] %.2f ms; union %llu experts, %llu read (%.1f KB)\n", s.ms,
                     (unsigned long long)s.union_experts, (unsigned long long)s.missed_experts,
                     double(s.bytes_read) / 1e3);
    }
  };
  opt.cancel = &g_interrupted;
  // --top-logits K: the K highest logits each token was chosen from, for comparing engines.
  nlohmann::json top_logits = nlohmann::json::array();
  if (a.top_logits > 0) {
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
  progress.finish();
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
                        {"prefill_flops", prefill_flops},
                        {"decode_ms", r.decode_ms},
                        {"stop_reason", r.stop_reason},
                        {"steps", r.steps},
                        {"proposed", r.proposed},
                        {"accepted", r.accepted},
                        {"cached_tokens", session->restored()}};
    if (!a.model.sampling.greedy()) j["seed"] = a.model.sampling.seed;
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
    if (constraint)
      j["guided"] = {{"masks", constraint->masks()}, {"memo_hits", constraint->memo_hits()},
                     {"mask_parts", constraint->mask_parts()},
                     {"shared_walks", constraint->shared_walks()}, {"wait_ms", constraint->wait_seconds() * 1e3},
                     {"complete", constraint->complete()}};
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
  if (!a.stats.empty()) {
    std::fputs(seed_text(a.model).c_str(), stderr);
    double decode_tokens = double(r.generated.size() > 0 ? r.generated.size() - 1 : 0);
    std::fprintf(stderr,
                 "[stats] prompt=%zu cached=%zu generated=%zu prefill=%.1f ms (%.1f tok/s) decode=%.1f ms (%.2f tok/s) stop=%s "
                 "threads=%d\n",
                 prompt.size(), session->restored(), r.generated.size(), r.prefill_ms, prompt.size() * 1000.0 / std::max(r.prefill_ms, 1e-9),
                 r.decode_ms, decode_tokens * 1000.0 / std::max(r.decode_ms, 1e-9), r.stop_reason.c_str(),
                 ThreadPool::global().size());
    if (drafter)
      std::fprintf(stderr, "[draft] drafter=%s steps=%lld proposed=%lld accepted=%lld (%.1f%%) tokens/step=%.2f\n",
                   drafter->name(), (long long)r.steps, (long long)r.proposed, (long long)r.accepted,
                   r.proposed ? 100.0 * r.accepted / r.proposed : 0.0,
                   r.steps ? double(r.generated.size() - 1) / double(r.steps) : 0.0);
    if (constraint)
      std::fprintf(stderr,
                   "[guided] masks=%llu (memoized %llu, %llu walks in %d share%s) waited=%.1f ms (%.1f%% of decode) "
                   "complete=%s\n",
                   (unsigned long long)constraint->masks(), (unsigned long long)constraint->memo_hits(),
                   (unsigned long long)constraint->shared_walks(), constraint->mask_parts(),
                   constraint->mask_parts() == 1 ? "" : "s", constraint->wait_seconds() * 1e3,
                   100.0 * constraint->wait_seconds() * 1e3 / std::max(r.decode_ms, 1e-9),
                   constraint->complete() ? "yes" : "no");
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
  CLI::App* sub = app.add_subcommand(
      "run", "Generate from a prompt with a model directory (kimi_k3, kimi_linear, qwen3, qwen3_moe, deepseek_v3, "
             "kimi_k2, gpt_oss)");
  sub->footer(
      "Exit status: 0 done, 1 an error (a bad file or model), 2 a usage error (a bad or conflicting flag), 130 "
      "interrupted (SIGINT/SIGTERM; what was generated is printed first).\n"
      "Environment: SLUICE_THREADS (compute threads; --threads wins), SLUICE_ISA (scalar, avx2, avx512; --isa "
      "wins), SLUICE_CUDA_PROFILE=1 (per-op GPU time on a CUDA device), HF_TOKEN (a streamed install's fetches).");
  sub->add_option("--model", a->model.engine.model_dir, "Model directory (config.json + safetensors)")->required();
  auto* ids_opt = sub->add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids, e.g. 1,2,3");
  auto* text_opt = sub->add_option("--prompt", a->prompt_text,
                                   "Prompt text (encoded with the model's tokenizer); - reads it from stdin")
                       ->excludes(ids_opt);
  sub->add_option("--prompt-file", a->prompt_file,
                  "Prompt text from a file (no length limit but --max-context; one final newline is dropped, as "
                  "with --prompt -)")
      ->excludes(ids_opt)
      ->excludes(text_opt);
  sub->add_flag("--chat", a->chat,
                "Render the prompt text as one user message in the model's chat format (Kimi K3, Qwen3, DeepSeek-V3, "
                "Kimi K2, gpt-oss)");
  add_chat_flags(sub, a->model, "With --chat: ");
  sub->add_option("--max-new", a->max_new, "Maximum number of tokens to generate")->default_val(32)->transform(integer_in(0, INT32_MAX));
  add_sampling_flags(sub, a->model);
  add_model_flags(sub, a->model);
  sub->add_option("--stats", a->stats,
                  "Print timing, drafting and expert counters to stderr; --stats=verbose adds a line per decode step "
                  "(the drafting decision, experts and bytes read)")
      ->expected(0, 1)
      ->default_str("summary")
      ->check(one_of({"summary", "verbose"}))
      ->option_text("[=verbose]");
  sub->add_flag("--json", a->json,
                "Print one JSON object on stdout: prompt_ids, generated_ids, prefill_ms, prefill_flops (the device's count of "
                "floating-point operations in products, attention and recurrences; 0 on a device that does not count), decode_ms, stop_reason (and "
                "seed when sampling)");
  sub->add_flag("--ignore-eos", a->no_eos, "Keep generating past the end-of-sequence token");
  auto* grammar_opt = sub->add_option("--grammar-file", a->grammar_file,
                                      "Guided decoding: every generated token keeps the output a prefix of a sentence of "
                                      "this GBNF grammar (llama.cpp syntax, start rule `root`; <[ID]> matches token ID); "
                                      "the model ends only where the grammar may end. The target still picks every "
                                      "token among the allowed ones")
                          ->check(CLI::ExistingFile);
  auto* schema_opt = sub->add_option("--json-schema", a->json_schema_file,
                                     "Guided decoding: the output (with --chat, the answer after any reasoning) is JSON "
                                     "valid against this JSON Schema file (types, properties, required, enum, const, "
                                     "items, anyOf, $ref, string formats date/time/date-time/uuid; other constraining "
                                     "keywords are refused)")
                         ->check(CLI::ExistingFile);
  auto* object_opt = sub->add_flag("--json-object", a->json_object,
                                   "Guided decoding: the output (with --chat, the answer) is one JSON object");
  grammar_opt->excludes(schema_opt)->excludes(object_opt);
  schema_opt->excludes(object_opt);
  sub->add_option("--top-logits", a->top_logits,
                  "With --json: add top_logits, the K highest [id, logit] pairs each token was chosen from (drafting off)")
      ->transform(integer_in(1, 1000));
  sub->add_option("--router-trace", a->model.engine.router_trace,
                  "Record every routed-expert request (layer, experts) as JSON lines, for `sluice warm`");
  sub->add_option("--events", a->events, "Write a JSON-lines event log (run_start, prefill_done, decode_step, run_end)");
  return [a] { return run(*a); };
}

}  // namespace sluice::cli
