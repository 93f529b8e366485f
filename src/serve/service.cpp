// Request preparation and generation for the OpenAI and Anthropic endpoints.
#include "serve/service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "fetch/sha256.h"
#include "guide/json_schema.h"
#include "runtime/generate.h"
#include "runtime/grammar_constraint.h"
#include "serve/anthropic_reply.h"
#include "serve/anthropic_request.h"
#include "serve/chat_options.h"
#include "serve/responses_reply.h"
#include "serve/responses_request.h"
#include "serve/sse.h"
#include "serve/stop_matcher.h"
#include "tokenizer/utf8.h"

namespace sluice::serve {
namespace {

// Out of the generation loop: the answer is complete early (a stop sequence matched).
struct StopSequenceHit {};
// Out of the generation loop: the server is shutting down.
struct ShuttingDown {};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string clean(std::string_view bytes) { return tokenizer::utf8_replace_invalid(bytes); }

ApiError no_chat_format() {
  return ApiError(400, "This model's tokenizer has no chat format (the special tokens of Kimi K3, Qwen3, DeepSeek-V3, "
                  "Kimi K2 or gpt-oss); use /v1/completions.",
                  "invalid_request_error", "messages", "chat_unsupported");
}

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Sets `cancel` once `stop()` says so, checked every kPoll while it lives. The engine can spend
// minutes in one prefill without producing a token, so the client and the shutdown flag are
// watched from this thread, not from the token callback; the generation sees the flag before
// every layer of a pass.
class CancelWatcher {
 public:
  static constexpr std::chrono::milliseconds kPoll{50};
  // A client gone (or a shutdown begun) already is seen here, before the generation starts: left
  // to the thread, a short generation could finish before it was first scheduled.
  CancelWatcher(std::atomic<bool>& cancel, std::function<bool()> stop) : cancel_(cancel), stop_(std::move(stop)) {
    if (stop_()) {
      cancel_.store(true);
      return;
    }
    thread_ = std::thread([this] { watch(); });
  }
  ~CancelWatcher() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      if (stop_()) {
        cancel_.store(true);
        return;
      }
      wake_.wait_for(lock, kPoll, [&] { return done_; });
    }
  }
  std::atomic<bool>& cancel_;
  std::function<bool()> stop_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // started last, once the members it reads exist
};

}  // namespace

Service::Service(const ServeOptions& options)
    : opt_(options), admission_(options.queue), telemetry_slots_(options.telemetry_streams) {
  SLUICE_CHECK(opt_.max_tokens >= 1, "--max-tokens must be at least 1");
  SLUICE_CHECK(opt_.default_max_tokens >= 1, "--default-max-tokens must be at least 1");
  SLUICE_CHECK(opt_.max_context >= 2, "--max-context must be at least 2");
  SLUICE_CHECK(opt_.queue <= 64, "--queue must be at most 64 (got ", opt_.queue, ")");
  SLUICE_CHECK(opt_.telemetry_streams <= 64, "--telemetry-streams must be at most 64 (got ", opt_.telemetry_streams, ")");
  SLUICE_CHECK(opt_.max_requests >= opt_.queue + opt_.telemetry_streams + 8, "--max-requests ", opt_.max_requests,
               " leaves too little room: the running request, --queue ", opt_.queue, " waiting ones, --telemetry-streams ",
               opt_.telemetry_streams, " and other requests need at least ", opt_.queue + opt_.telemetry_streams + 8);
  SLUICE_CHECK(opt_.max_request_bytes >= 1024, "--max-request-bytes must be at least 1024");
  engine_ = runtime::Engine::load(opt_.engine);
  tokenizer_ = engine_->tokenizer();
  if (!tokenizer_)
    fail(opt_.engine.model_dir, ": no tokenizer (tiktoken.model + tokenizer_config.json, or tokenizer.json); ",
         "the server needs one to render chats and decode replies");
  if (opt_.chat_format.empty()) {
    format_ = tokenizer::detect_chat_format(*tokenizer_, tokenizer::read_chat_template(opt_.engine.model_dir));
  } else {
    format_ = tokenizer::chat_format_from_name(opt_.chat_format);
    SLUICE_CHECK(format_.has_value(), "--chat-format: unknown chat format '", opt_.chat_format, "'");
  }
  const int64_t vocab = engine_->info().vocab_size;
  if (tokenizer_->vocab_size() > vocab)
    fail(opt_.engine.model_dir, ": the tokenizer has ", tokenizer_->vocab_size(), " ids but the model only ", vocab,
         "; they do not belong together");
  session_ = engine_->new_session(opt_.state_reuse);
  std::filesystem::path dir = std::filesystem::path(opt_.engine.model_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "models/k3/" names "k3"
  limits_.model_id = opt_.model_id.empty() ? dir.filename().string() : opt_.model_id;
  if (limits_.model_id.empty()) limits_.model_id = "sluice";
  limits_.max_tokens = opt_.max_tokens;
  id_rng_.seed(std::random_device{}());
  // The model (its type and sizes) and the device with its kernels.
  fetch::Sha256 fp;
  for (const std::string& part : {std::string("sluice"), engine_->info().model_type,
                                  std::to_string(engine_->info().vocab_size), std::to_string(engine_->info().hidden_size),
                                  std::to_string(engine_->info().num_layers), engine_->device().name()})
    fp.update(part.data(), part.size() + 1);
  fingerprint_ = "fp_" + fp.hex().substr(0, 12);
}

Service::~Service() = default;

Json Service::models_json() const {
  return Json{{"object", "list"},
              {"data", Json::array({Json{{"id", limits_.model_id},
                                         {"object", "model"},
                                         {"created", 0},
                                         {"owned_by", "sluice"}}})}};
}

Json Service::health_json() const {
  return Json{{"status", shutting_down_ ? "shutting_down" : "ok"},
              {"model", limits_.model_id},
              {"generating", admission_.busy()},
              {"waiting", admission_.waiting()},
              {"completed", completed_.load()}};
}

std::string Service::new_id(const char* prefix) {
  std::lock_guard<std::mutex> lock(id_mu_);
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", (unsigned long long)id_rng_(),
                (unsigned long long)(id_rng_() & 0xffffffffu));
  return std::string(prefix) + hex;
}

void Service::fill_common(PreparedRequest& p, const CommonRequest& c, bool chat, bool too_long) {
  const int64_t n = int64_t(p.prompt.size());
  if (too_long || n >= opt_.max_context)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(opt_.max_context) +
                       " tokens. However, your " + (chat ? "messages" : "prompt") + " resulted in " +
                       (too_long ? "more than " + std::to_string(opt_.max_context - 1) : std::to_string(n)) +
                       " tokens.",
                   "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
  const int32_t vocab = int32_t(engine_->info().vocab_size);
  for (int32_t id : p.prompt)
    if (id < 0 || id >= vocab) fail("prompt token ", id, " is outside the model's vocabulary (", vocab, ")");
  int64_t want = c.max_tokens > 0 ? c.max_tokens : (chat ? opt_.default_max_tokens : limits_.default_completion_tokens);
  p.max_new = std::min({want, opt_.max_tokens, opt_.max_context - n});
  p.common = c;
  if (!p.common.sampling.greedy() && !p.common.seed_given) {
    std::lock_guard<std::mutex> lock(id_mu_);
    p.common.sampling.seed = id_rng_();
  }
  p.created = unix_now();
}

PreparedRequest Service::prepare_completion(const std::string& body, const std::function<void()>& admit) {
  CompletionRequest c = parse_completion_request(parse_body(body), limits_);
  if (admit) admit();
  PreparedRequest p;
  // Tokenizing stops as soon as the prompt cannot fit the context: a 100 MB prompt costs a length
  // check, not seconds of encoding and gigabytes of ids.
  const bool fits = tokenizer_->encode_into_at_most(c.prompt, p.prompt, size_t(opt_.max_context - 1));
  fill_common(p, c, false, !fits);
  p.id = new_id("cmpl-");
  return p;
}

PreparedRequest Service::prepare_chat(const std::string& body, const std::function<void()>& admit) {
  ChatRequest c = parse_chat_request(parse_body(body), limits_);
  if (!format_) throw no_chat_format();
  tokenizer::ChatOptions co = chat_options_for(*format_, c);
  return prepare_chat_request(std::move(c), std::move(co), admit, Api::chat);
}

PreparedRequest Service::prepare_messages(const std::string& body, const std::function<void()>& admit) {
  MessagesRequest m = parse_messages_request(parse_body(body), limits_);
  if (!format_) throw no_chat_format();
  tokenizer::ChatOptions co = messages_chat_options(*format_, m);
  PreparedRequest p = prepare_chat_request(std::move(m.chat), std::move(co), admit, Api::messages);
  // Anthropic returns thinking blocks only when the request enabled thinking.
  p.show_reasoning = m.thinking == MessagesRequest::Thinking::enabled;
  return p;
}

PreparedRequest Service::prepare_responses(const std::string& body, const std::function<void()>& admit) {
  ResponsesRequest r = parse_responses_request(parse_body(body), limits_);
  if (!format_) throw no_chat_format();
  tokenizer::ChatOptions co = chat_options_for(*format_, r.chat);
  PreparedRequest p = prepare_chat_request(std::move(r.chat), std::move(co), admit, Api::responses);
  p.echo = std::move(r.echo);
  return p;
}

Json Service::count_message_tokens(const std::string& body) {
  MessagesRequest m = parse_count_tokens_request(parse_body(body), limits_);
  if (!format_) throw no_chat_format();
  return Json{{"input_tokens", int64_t(render(m.chat, messages_chat_options(*format_, m)).ids.size())}};
}

tokenizer::RenderedChat Service::render(const ChatRequest& c, const tokenizer::ChatOptions& co) const {
  try {
    // Tool-call arguments in the form the template expects (DeepSeek concatenates JSON text; Kimi
    // K2 and gpt-oss JSON-print objects).
    return tokenizer::render_chat(*tokenizer_, *format_, tokenizer::adapt_tool_arguments(*format_, c.messages), co);
  } catch (const Error& e) {
    invalid("messages", std::string("The messages could not be rendered: ") + e.what(), "invalid_value");
  }
}

// The grammar of a reply whose answer response_format constrains: one JSON object, or JSON valid
// against the request's schema (refused with a 400 naming what the grammar cannot enforce).
runtime::GuidedReply Service::guided_format(const Json& response_format, bool thinking) const {
  const std::string type = response_format.value("type", "");
  if (type != "json_object" && type != "json_schema") return {};
  std::string content;
  try {
    if (type == "json_object") {
      content = guide::json_any_object_gbnf("content-");
    } else {
      // Requests are ordered_json: the schema keeps its declared property order.
      content = guide::json_schema_gbnf(response_format["json_schema"]["schema"], "content-");
    }
  } catch (const Error& e) {
    invalid("response_format.json_schema.schema", std::string("The schema cannot be enforced: ") + e.what(),
            "invalid_value");
  }
  try {
    return runtime::guided_reply(*tokenizer_, *format_, thinking, content);
  } catch (const Error& e) {
    invalid("response_format", e.what(), "unsupported_value");
  }
}

// The grammar of a reply that must call tools (tool_choice required / any / a named tool): calls
// of the offered tools (or the named one) with arguments valid against their parameters.
runtime::GuidedReply Service::guided_tools(const ChatRequest& c, bool thinking) const {
  std::vector<runtime::GuidedTool> tools;
  for (const Json& t : c.tools) {
    const Json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!c.tool_name.empty() && name != c.tool_name) continue;
    tools.push_back({name, fn.contains("parameters") ? fn["parameters"] : Json(nullptr)});
  }
  try {
    return runtime::guided_tool_calls(*tokenizer_, *format_, thinking, tools, c.parallel_tool_calls);
  } catch (const Error& e) {
    invalid("tool_choice", std::string("The tool calls cannot be enforced: ") + e.what(), "unsupported_value");
  }
}

PreparedRequest Service::prepare_chat_request(ChatRequest c, tokenizer::ChatOptions co,
                                              const std::function<void()>& admit, Api api) {
  if (admit) admit();
  PreparedRequest p;
  p.api = api;
  p.format = *format_;
  p.opened_think = tokenizer::prompt_opens_think(*format_, co);
  co.max_ids = size_t(opt_.max_context - 1);
  tokenizer::RenderedChat rendered = render(c, co);
  p.prompt = std::move(rendered.ids);
  // Required calls are the whole reply, so they take the place of a response format.
  if (c.tool_choice == "required") p.guided = guided_tools(c, co.thinking);
  else if (c.response_format.is_object()) p.guided = guided_format(c.response_format, co.thinking);
  fill_common(p, c, true, rendered.too_long);
  p.id = new_id(api == Api::messages ? "msg_" : api == Api::responses ? "resp_" : "chatcmpl-");
  return p;
}

Json Service::run(const PreparedRequest& req, const std::function<bool(const std::string&)>& write,
                  const std::function<bool()>& client_gone) {
  const ApiError shutdown_error(503, "The server is shutting down.", "server_error", "", "shutting_down");
  if (shutting_down_) throw shutdown_error;
  const bool chat = req.api != Api::completion;
  const model::TargetInfo& info = engine_->info();
  // A stream that has said nothing for heartbeat_ms while tokens are generated (the reply parser
  // withholds a tool call until it ends; a random model can stay inside one) gets an SSE comment,
  // which every client ignores. It keeps proxies from timing the stream out, and it is how a
  // client that left is noticed once the response has begun: its end of stream alone looks like
  // a half-close (connection_probe.h), a write to it is answered with a reset.
  Clock::time_point last_write = Clock::now();
  ReplyWriter::Send send = [&](const std::string& event) {
    if (!write(event)) throw ClientGone{};
    last_write = Clock::now();
  };
  ReplyContext ctx{req.id, req.created, limits_.model_id, req.common.stream, req.common.include_usage,
                   int64_t(req.prompt.size()), req.show_reasoning, fingerprint_, req.common.top_logprobs >= 0};
  std::unique_ptr<ReplyWriter> out =
      req.api == Api::messages    ? make_anthropic_writer(std::move(ctx), send)
      : req.api == Api::responses ? make_responses_writer(std::move(ctx), req.echo, send)
                                  : make_openai_writer(chat ? OpenAiShape::chat : OpenAiShape::completion, std::move(ctx), send);

  StopMatcher stop(req.common.stop);
  std::unique_ptr<tokenizer::ReplyStream> reply;
  if (chat) reply = std::make_unique<tokenizer::ReplyStream>(*tokenizer_, req.format, req.opened_think);
  tokenizer::Utf8StreamDecoder utf8;
  size_t pushed_reasoning = 0, pushed_content = 0;  // bytes of the parser's output already taken
  int64_t completion_tokens = 0;

  auto add_reasoning = [&](const std::string& raw) {
    if (raw.empty()) return;
    pushed_reasoning += raw.size();
    out->reasoning(clean(raw));
  };
  auto add_content = [&](const std::string& text) {
    if (!text.empty()) out->content(text);
  };
  auto add_raw_content = [&](const std::string& raw) {
    if (raw.empty()) return;
    pushed_content += raw.size();
    add_content(stop.push(clean(raw)));
  };

  out->begin();

  // Conversation state reuse: the session continues from its state when the prompt extends it.
  runtime::GenerateOptions go;
  std::unique_ptr<runtime::GrammarConstraint> constraint;
  if (req.guided.grammar) {
    constraint = std::make_unique<runtime::GrammarConstraint>(engine_->guide_vocabulary(), req.guided.grammar,
                                                              info.eos_token_ids, req.guided.starts_after);
    go.constraint = constraint.get();
  }
  go.max_new = req.max_new;
  go.sampling = req.common.sampling;
  go.stop_at_eos = !req.common.ignore_eos;
  if (req.common.top_logprobs >= 0) {
    go.top_logprobs = req.common.top_logprobs;
    go.on_logprobs = [&](const runtime::TokenLogprobs& lp) {
      if (go.stop_at_eos && info.is_eos(lp.token)) return;  // the end token is not part of the reply
      Json entry = token_logprob(lp.token, lp.logprob);
      Json top = Json::array();
      for (const auto& [id, value] : lp.top) top.push_back(token_logprob(id, value));
      entry["top_logprobs"] = std::move(top);
      out->logprobs(entry);
    };
  }
  // A client gone or a shutdown stops the generation within one layer, even inside a prefill.
  // Only the watcher calls client_gone while the generation runs.
  std::atomic<bool> cancel{false};
  go.cancel = &cancel;
  ReplyEnd end;
  const Clock::time_point started = Clock::now();
  Clock::time_point first_token{};
  const uint64_t bytes_before = engine_->store() ? engine_->store()->read_totals().bytes_read : 0;
  auto on_step = [&](const runtime::StepInfo& step) {
    end.stats.drafts_proposed += step.proposed;
    end.stats.drafts_accepted += step.accepted;
  };
  try {
    CancelWatcher watcher(cancel, [&] { return shutting_down_.load() || (client_gone && client_gone()); });
    auto on_token = [&](int32_t id) {
      if (completion_tokens++ == 0) first_token = Clock::now();
      ++generated_tokens_;
      publish_store_counters();
      if (chat) {
        auto d = reply->push(std::span<const int32_t>(&id, 1));
        add_reasoning(d.reasoning);
        add_raw_content(d.content);
      } else if (!info.is_eos(id)) {
        add_content(stop.push(utf8.push(tokenizer_->generated_bytes(id))));
      }
      if (stop.hit()) throw StopSequenceHit{};
      if (req.common.stream && Clock::now() - last_write >= std::chrono::milliseconds(opt_.heartbeat_ms))
        send(": keep-alive\n\n");
    };
    runtime::GenerateResult r = session_->generate(req.prompt, go, on_token, on_step);
    if (r.stop_reason == "cancelled") {
      // Stopped inside a pass, the session has reset its state; between steps it kept it (the
      // prompt and the tokens sent). Either way the next request is exact.
      publish_store_counters();
      if (shutting_down_) throw ShuttingDown{};
      throw ClientGone{};
    }
    end.reason = r.stop_reason == "eos" ? ReplyEnd::Reason::eos : ReplyEnd::Reason::length;
  } catch (const StopSequenceHit&) {
    end.reason = ReplyEnd::Reason::stop_sequence;
  } catch (const ShuttingDown&) {
    if (req.common.stream) write(out->error_event(shutdown_error));
    throw shutdown_error;
  }
  publish_store_counters();
  const Clock::time_point ended = Clock::now();

  // Release what the parsers withheld (the tail of the text, tool calls).
  if (chat) {
    tokenizer::ParsedReply parsed = reply->finish();
    if (!stop.hit()) {
      if (parsed.reasoning.size() > pushed_reasoning) add_reasoning(parsed.reasoning.substr(pushed_reasoning));
      if (parsed.content.size() > pushed_content) add_raw_content(parsed.content.substr(pushed_content));
      add_content(stop.flush());
      end.tool_calls = std::move(parsed.tool_calls);
      for (auto& c : end.tool_calls)
        if (c.id.empty()) c.id = new_id(out->tool_id_prefix());
    }
  } else if (!stop.hit()) {
    add_content(stop.push(utf8.finish()));
    add_content(stop.flush());
  }
  if (stop.hit()) {
    end.reason = ReplyEnd::Reason::stop_sequence;
    end.stop_sequence = stop.matched();
  }
  end.prompt_tokens = int64_t(req.prompt.size());
  end.completion_tokens = completion_tokens;
  end.cached_tokens = int64_t(session_->reused());
  const bool any = completion_tokens > 0;
  end.stats.ttft_ms = any ? ms_between(started, first_token) : ms_between(started, ended);
  end.stats.prefill_ms = end.stats.ttft_ms;
  end.stats.decode_ms = any ? ms_between(first_token, ended) : 0.0;
  end.stats.decoded = any ? completion_tokens - 1 : 0;
  end.stats.bytes_read = (engine_->store() ? engine_->store()->read_totals().bytes_read : 0) - bytes_before;
  ++completed_;
  return out->finish(end);
}

Json Service::token_logprob(int32_t id, float logprob) const {
  const std::string_view bytes = tokenizer_->generated_bytes(id);
  Json b = Json::array();
  for (unsigned char c : bytes) b.push_back(int(c));
  // A probability that underflows to 0 is reported as OpenAI does: -9999.
  return {{"token", clean(bytes)}, {"logprob", std::isfinite(logprob) ? double(logprob) : -9999.0}, {"bytes", b}};
}

void Service::publish_store_counters() {
  store::StreamingExperts* st = engine_->store();
  if (!st) return;
  const store::StoreCounters& c = st->counters();
  std::lock_guard<std::mutex> lock(store_mu_);
  store_sample_ = StoreSample{c.requests, c.hits, c.misses, c.bytes_read, c.prefetch_issued, c.prefetch_used};
  if (const store::DeviceTier* t = engine_->tier()) {
    const store::TierCounters& tc = t->counters();
    tier_sample_ = TierSample{true, tc.requests, tc.hits, tc.bytes_copied, tc.on_host};
  }
}

TelemetrySample Service::telemetry_sample() const {
  TelemetrySample s;
  s.seconds = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  s.generating = admission_.busy();
  s.waiting = admission_.waiting();
  s.completed = completed_.load();
  s.tokens = generated_tokens_.load();
  s.telemetry_streams = telemetry_slots_.open();
  // The store and its manifest live as long as the engine; the reader's per-home totals are
  // read under its own lock, the store's counters as the generating thread last published them.
  if (store::StreamingExperts* st = engine_->store()) {
    s.streaming = true;
    {
      std::lock_guard<std::mutex> lock(store_mu_);
      s.store = store_sample_;
      s.tier = tier_sample_;
    }
    std::vector<store::HomeStats> homes = st->home_stats();
    for (size_t h = 0; h < homes.size(); ++h)
      s.drives.push_back(DriveSample{st->manifest().homes[h].path, homes[h].reads, homes[h].bytes, homes[h].errors});
  }
  return s;
}

}  // namespace sluice::serve
