// `sluice chat`: an interactive terminal chat over the engine. Every turn renders the whole
// conversation in the model's chat format and the session continues from the state of the prefix
// it already consumed (as the server does); replies stream as they are decided, reasoning dimmed.
// Ctrl-C stops a reply (the engine's cancel flag) and drops a half-typed message; Ctrl-D or /quit
// leaves. No line-editing library: on a terminal LineReader (terminal.h) edits a line itself.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "cli/arg_lists.h"
#include "cli/chat_conversation.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/prefill_progress.h"
#include "cli/terminal.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace sluice::cli {
namespace {

// SIGINT sets g_stop (stop the reply, or drop the line being typed); SIGTERM and SIGHUP (the
// terminal went away) set both: the reply stops and the chat ends.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_quit{false};

extern "C" void on_chat_signal(int sig) {
  if (sig != SIGINT) g_quit.store(true);
  g_stop.store(true);
}

// Installs the handlers while alive. No SA_RESTART: a blocked read returns at once. A signal the
// parent set to be ignored stays ignored.
class ChatSignals {
 public:
  ChatSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_chat_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      ::sigaction(kSignals[i], nullptr, &old_[i]);
      if (old_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~ChatSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

struct ChatArgs {
  ModelFlags model;
  int64_t max_tokens = 4096;
  bool stats = false;
};

// What /stats reports about the last reply.
struct TurnStats {
  size_t prompt_tokens = 0, reused = 0, generated = 0;
  double ttft_ms = 0, decode_ms = 0;
  int64_t steps = 0, proposed = 0, accepted = 0;
  uint64_t bytes_read = 0;
  std::string stop_reason;
};

// Streams a reply's deltas to stdout: reasoning dimmed (or under a "--- reasoning ---" header when
// styles are off), a blank line or an "--- answer ---" header before the answer that follows it.
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool styles) : styles_(styles) {}
  void print(const tokenizer::ReplyStream::Delta& d) {
    if (!d.reasoning.empty()) {
      if (!reasoning_seen_ && !styles_) out("--- reasoning ---\n");
      reasoning_seen_ = true;
      // The style is closed after every piece, so a stopped reply never leaves the terminal dim.
      if (styles_) std::fputs("\033[2m", stdout);
      out(terminal_safe(d.reasoning));
      if (styles_) std::fputs("\033[22m", stdout);
    }
    if (!d.content.empty()) {
      if (reasoning_seen_ && !content_seen_) {
        if (!at_line_start_) out("\n");
        out(styles_ ? "\n" : "--- answer ---\n");
      }
      content_seen_ = true;
      out(terminal_safe(d.content));
    }
    std::fflush(stdout);
  }
  // A line of its own (dimmed when styles are on): tool calls, "[stopped]".
  void note(const std::string& text) {
    end_line();
    if (styles_) std::fputs("\033[2m", stdout);
    out(terminal_safe(text));
    if (styles_) std::fputs("\033[22m", stdout);
    out("\n");
  }
  void end_line() {
    if (!at_line_start_) out("\n");
    std::fflush(stdout);
  }
  // The terminal echoed something where the cursor was (^C): the next note starts a new line.
  void echoed() { at_line_start_ = false; }

 private:
  void out(const std::string& s) {
    if (s.empty()) return;
    std::fputs(s.c_str(), stdout);
    at_line_start_ = s.back() == '\n';
  }
  bool styles_, reasoning_seen_ = false, content_seen_ = false, at_line_start_ = true;
};

const char* const kHelp =
    "Type a message and press Enter. A line ending in \\ continues on the next; a line \"\"\" opens a block\n"
    "that the next \"\"\" line closes (for pasting). Start a message with // to send a leading /.\n"
    "  /system TEXT   set the system prompt (/system alone clears it); the next reply reads it\n"
    "  /reset         forget the conversation (the system prompt stays)\n"
    "  /stats         the last reply: TTFT, tok/s, drafts accepted, bytes read from the expert store\n"
    "  /save FILE     write the conversation as OpenAI chat JSON (atomically)\n"
    "  /think on|off|EFFORT  reasoning from the next reply on: on (the format's default), off, or an\n"
    "                 effort the format takes (K3: low, high, max; gpt-oss: low, medium, high)\n"
    "  /help          this text\n"
    "  /quit          leave (or Ctrl-D on an empty line); Ctrl-C stops a reply\n";

class Chat {
 public:
  Chat(ChatArgs& a, runtime::Engine& engine, const ChatSetup& setup)
      : a_(a),
        engine_(engine),
        tok_(*engine.tokenizer()),
        setup_(setup),
        session_(engine.new_session(/*reuse_state=*/true)),
        conversation_(a.model.system_prompt),
        styles_(styles_allowed(1)),
        interactive_(::isatty(0)),
        think_(a.model.no_think ? "off" : a.model.reasoning_effort.empty() ? "on" : a.model.reasoning_effort),
        progress_(!a.model.no_progress) {}

  int loop() {
    LineReader reader(0);
    MessageAssembler message;
    std::string line;
    for (;;) {
      if (g_quit) break;
      const char* prompt = message.continuing() ? "... " : "> ";
      if (interactive_) {
        std::fputs(prompt, stdout);
        std::fflush(stdout);
      }
      const LineReader::Status st = reader.read_line(line, g_stop, interactive_ ? prompt : "");
      if (st == LineReader::Status::eof) {
        if (interactive_) std::fputs("\n", stdout);
        break;
      }
      if (st == LineReader::Status::interrupted) {
        // Ctrl-C at the prompt drops what was typed; the terminal has echoed ^C.
        g_stop = false;
        message.clear();
        if (g_quit) break;
        std::fputs("\n", stdout);
        continue;
      }
      if (!message.continuing() && line.starts_with('/') && !line.starts_with("//")) {
        if (!command(line)) break;
        continue;
      }
      if (!message.continuing() && line.starts_with("//")) line.erase(0, 1);
      if (!message.push(line)) continue;
      std::string text = message.take();
      if (text.find_first_not_of(" \t\n") == std::string::npos) continue;
      turn(std::move(text));
    }
    std::fflush(stdout);
    return 0;
  }

 private:
  // Runs a /command; false: leave.
  bool command(const std::string& line) {
    const size_t space = std::min(line.find_first_of(" \t"), line.size());
    const std::string name = line.substr(0, space);
    std::string arg = line.substr(std::min(line.find_first_not_of(" \t", space), line.size()));
    while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t' || arg.back() == '\r')) arg.pop_back();
    if (name == "/quit" || name == "/exit") return false;
    if (name == "/help") {
      std::fputs(kHelp, stdout);
    } else if (name == "/reset") {
      conversation_.clear();
      session_->reset();
      std::fputs("(conversation cleared)\n", stdout);
    } else if (name == "/stats") {
      std::fputs(stats_text().c_str(), stdout);
    } else if (name == "/system") {
      conversation_.set_system(arg);
      std::fputs(arg.empty() ? "(system prompt cleared)\n" : "(system prompt set; the next reply reads it)\n", stdout);
    } else if (name == "/think") {
      if (arg.empty()) {
        std::printf("(thinking: %s)\n", think_.c_str());
      } else {
        try {
          setup_ = chat_setup_for(setup_.format, arg == "on" ? "" : arg == "off" ? "none" : arg);
          think_ = arg;
          std::printf("(thinking: %s, from the next reply on)\n", think_.c_str());
        } catch (const Error& e) {
          std::printf("error: %s (thinking stays %s)\n", e.what(), think_.c_str());
        }
      }
    } else if (name == "/save") {
      if (arg.empty()) {
        std::fputs("usage: /save FILE\n", stdout);
      } else {
        try {
          conversation_.save(arg, model_id());
          std::printf("(saved %zu messages to %s)\n", conversation_.messages().size(), arg.c_str());
        } catch (const Error& e) {
          std::printf("error: %s\n", e.what());
        }
      }
    } else {
      std::printf("unknown command %s; /help lists them (start a message with // to send a leading /)\n",
                  name.c_str());
    }
    std::fflush(stdout);
    return true;
  }

  std::string model_id() const {
    std::filesystem::path dir = std::filesystem::path(a_.model.engine.model_dir).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();
    return dir.filename().empty() ? "sluice" : dir.filename().string();
  }

  void turn(std::string text) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    conversation_.add_user(std::move(text));
    tokenizer::ChatOptions options = setup_.options;
    const int64_t max_context = a_.model.max_context;
    options.max_ids = size_t(max_context - 1);
    tokenizer::RenderedChat rendered = tokenizer::render_chat(tok_, setup_.format, conversation_.messages(), options);
    if (rendered.too_long) {
      conversation_.drop_last();
      std::printf("error: the conversation is longer than --max-context %lld allows; /reset starts over\n",
                  (long long)max_context);
      std::fflush(stdout);
      return;
    }
    const std::vector<int32_t>& prompt = rendered.ids;
    runtime::GenerateOptions go = generate_options(a_.model);
    go.max_new = std::min<int64_t>(a_.max_tokens, max_context - int64_t(prompt.size()));
    go.cancel = &g_stop;  // a Ctrl-C since the line was read stops this reply
    go.on_prefill = [&](int64_t done, int64_t total) { progress_.update(done, total); };
    tokenizer::ReplyStream reply(tok_, setup_.format, setup_.opens_think);
    ReplyPrinter printer(styles_);
    const uint64_t bytes0 = bytes_read();
    TurnStats s;
    std::optional<clock::time_point> first;
    auto on_token = [&](int32_t id) {
      if (!first) {
        progress_.finish();
        first = clock::now();
        s.ttft_ms = std::chrono::duration<double, std::milli>(*first - t0).count();
      }
      printer.print(reply.push(std::span<const int32_t>(&id, 1)));
    };
    runtime::GenerateResult r;
    try {
      r = session_->generate(prompt, go, on_token);
    } catch (const Error& e) {
      // A failed turn (an expert read that no home could serve, say) ends the turn, not the chat.
      progress_.finish();
      printer.end_line();
      std::printf("error: %s\n", e.what());
      std::fflush(stdout);
      conversation_.drop_last();
      session_->reset();
      g_stop = false;
      return;
    }
    progress_.finish();
    // Timed here rather than taken from the result: a stopped reply has a decode time too.
    if (first) s.decode_ms = std::chrono::duration<double, std::milli>(clock::now() - *first).count();
    printer.print(reply.flush());
    tokenizer::ParsedReply parsed = reply.finish();
    for (const auto& c : parsed.tool_calls) printer.note(cat("[tool call ", c.name, " ", c.arguments, "]"));
    const bool stopped = r.stop_reason == "cancelled";
    if (stopped && interactive_) printer.echoed();
    printer.end_line();
    if (stopped && r.generated.empty()) {
      // Stopped before the reply began: the message is taken back, to be typed again.
      conversation_.drop_last();
      printer.note("[stopped before the reply began; the message was dropped]");
    } else {
      if (stopped) printer.note("[stopped]");
      if (r.stop_reason == "max_new") printer.note(cat("[cut at ", go.max_new, " tokens (--max-tokens)]"));
      conversation_.add_assistant(parsed.content, parsed.reasoning);
    }
    g_stop = false;
    s.prompt_tokens = prompt.size();
    s.reused = session_->reused();
    s.generated = r.generated.size();
    s.steps = r.steps;
    s.proposed = r.proposed;
    s.accepted = r.accepted;
    s.bytes_read = bytes_read() - bytes0;
    s.stop_reason = r.stop_reason;
    last_ = s;
    has_last_ = true;
    if (a_.stats) std::fputs(stats_text().c_str(), stderr);
  }

  uint64_t bytes_read() { return engine_.store() ? engine_.store()->counters().bytes_read : 0; }

  std::string stats_text() const {
    if (!has_last_) return "(no reply yet)\n";
    const TurnStats& s = last_;
    const size_t decoded = s.generated > 0 ? s.generated - 1 : 0;
    std::string out = cat("last reply: ", s.generated, " tokens, stop ", s.stop_reason, "\n");
    out += cat("  prompt   ", s.prompt_tokens, " tokens, ", s.reused, " reused from the last turn's state, ",
               s.prompt_tokens - s.reused, " prefilled\n");
    char line[256];
    std::snprintf(line, sizeof line, "  TTFT     %.1f ms\n", s.ttft_ms);
    out += line;
    std::snprintf(line, sizeof line, "  decode   %.2f tok/s (%zu tokens in %.1f ms)\n",
                  s.decode_ms > 0 ? double(decoded) * 1000.0 / s.decode_ms : 0.0, decoded, s.decode_ms);
    out += line;
    if (engine_.drafter()) {
      std::snprintf(line, sizeof line, "  drafts   %lld of %lld accepted (%.1f%%) over %lld steps, drafter %s\n",
                    (long long)s.accepted, (long long)s.proposed, s.proposed ? 100.0 * double(s.accepted) / double(s.proposed) : 0.0,
                    (long long)s.steps, engine_.drafter()->name());
      out += line;
    } else {
      out += "  drafts   none (--draft off)\n";
    }
    if (engine_.streaming()) {
      std::snprintf(line, sizeof line, "  experts  %.1f MB read from the expert store\n", double(s.bytes_read) / 1e6);
      out += line;
    } else {
      out += "  experts  0 bytes read (resident, not streamed)\n";
    }
    if (!a_.model.sampling.greedy()) out += cat("  seed     ", a_.model.sampling.seed, "\n");
    return out;
  }

  ChatArgs& a_;
  runtime::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  ChatSetup setup_;
  std::unique_ptr<runtime::Session> session_;
  Conversation conversation_;
  const bool styles_, interactive_;
  std::string think_;  // what /think last set: on, off or an effort
  PrefillProgress progress_;
  TurnStats last_;
  bool has_last_ = false;
};

int chat(ChatArgs& a) {
  runtime::EngineOptions eo = prepare_engine(a.model);
  warn_unused_model_flags(a.model, nullptr);
  auto engine = runtime::Engine::load(eo);
  warn_unused_model_flags(a.model, engine.get());
  const ChatSetup setup = chat_setup(*engine, a.model);
  if (engine->tokenizer()->vocab_size() > engine->info().vocab_size)
    fail(eo.model_dir, ": the tokenizer has ", engine->tokenizer()->vocab_size(), " ids but the model only ",
         engine->info().vocab_size, "; they do not belong together");
  Chat chat(a, *engine, setup);
  if (::isatty(0)) {
    std::printf("sluice chat: %s (%s, chat format %s, %s, experts %s)\n", eo.model_dir.c_str(),
                engine->info().model_type.c_str(), tokenizer::chat_format_name(setup.format), engine->device().name().c_str(),
                engine->streaming() ? "streamed" : "resident");
    std::printf("/help lists the commands; Ctrl-C stops a reply; Ctrl-D or /quit leaves.\n");
    std::fflush(stdout);
  }
  ChatSignals signals;
  return chat.loop();
}

}  // namespace

Action register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Chat with a model in the terminal (streaming replies, history, /commands)");
  sub->footer(
      "Input: a line ending in \\ continues on the next; a line \"\"\" opens a block that the next \"\"\" line "
      "closes. Commands: /system TEXT, /reset, /stats, /save FILE, /think on|off|EFFORT, /help, /quit. Ctrl-C stops a reply; Ctrl-D or "
      "/quit leaves. Reasoning is dimmed on a terminal unless NO_COLOR is set.\n"
      "Exit status: 0 done, 1 an error (a bad file or model), 2 a usage error.\n"
      "Environment: SLUICE_THREADS, SLUICE_ISA, NO_COLOR (see sluice run --help).");
  sub->add_option("--model", a->model.engine.model_dir, "Model directory (config.json, safetensors, tokenizer files)")
      ->required();
  add_chat_flags(sub, a->model, "");
  sub->add_option("--max-tokens,--max-new", a->max_tokens, "Most tokens per reply")
      ->default_val(4096)
      ->transform(integer_in(1, INT32_MAX));
  add_sampling_flags(sub, a->model);
  add_model_flags(sub, a->model);
  sub->add_flag("--stats", a->stats, "Print /stats on stderr after every reply");
  return [a] { return chat(*a); };
}

}  // namespace sluice::cli
