// Request preparation and generation for the OpenAI-compatible endpoints.
#include "serve/service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "runtime/generate.h"
#include "serve/chat_options.h"
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

// Sets `cancel` once `stop()` says so, checked every kPoll while it lives. The engine can spend
// minutes in one prefill without producing a token, so the client and the shutdown flag are
// watched from this thread, not from the token callback; the generation sees the flag before
// every layer of a pass.
class CancelWatcher {
 public:
  static constexpr std::chrono::milliseconds kPoll{50};
  CancelWatcher(std::atomic<bool>& cancel, std::function<bool()> stop)
      : cancel_(cancel), stop_(std::move(stop)), thread_([this] { watch(); }) {}
  ~CancelWatcher() {
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
  std::thread thread_;  // last: starts once the members it reads exist
};

Json usage_json(int64_t prompt, int64_t completion, int64_t cached) {
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

}  // namespace

Json openai_tool_calls(const std::vector<tokenizer::ParsedToolCall>& calls, const std::function<std::string()>& new_id) {
  Json out = Json::array();
  for (const auto& c : calls)
    out.push_back(Json{{"id", c.id.empty() ? new_id() : clean(c.id)},
                       {"type", "function"},
                       {"function", {{"name", clean(c.name)}, {"arguments", clean(c.arguments)}}}});
  return out;
}

Service::Service(const ServeOptions& options) : opt_(options), admission_(options.queue) {
  SLUICE_CHECK(opt_.max_tokens >= 1, "--max-tokens must be at least 1");
  SLUICE_CHECK(opt_.default_max_tokens >= 1, "--default-max-tokens must be at least 1");
  SLUICE_CHECK(opt_.max_context >= 2, "--max-context must be at least 2");
  SLUICE_CHECK(opt_.queue <= 64, "--queue must be at most 64 (got ", opt_.queue, ")");
  SLUICE_CHECK(opt_.max_connections >= opt_.queue + 8, "--max-connections ", opt_.max_connections,
               " leaves too little room: the running request, --queue ", opt_.queue,
               " waiting ones and health checks need at least ", opt_.queue + 8);
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
  if (!format_)
    throw ApiError(400, "This model's tokenizer has no chat format (the special tokens of Kimi K3, Qwen3, DeepSeek-V3, "
                   "Kimi K2 or gpt-oss); use /v1/completions.",
                   "invalid_request_error", "messages", "chat_unsupported");
  tokenizer::ChatOptions co = chat_options_for(*format_, c);
  if (admit) admit();
  PreparedRequest p;
  p.chat = true;
  p.format = *format_;
  p.opened_think = tokenizer::prompt_opens_think(*format_, co);
  co.max_ids = size_t(opt_.max_context - 1);
  bool too_long = false;
  try {
    // Tool-call arguments in the form the template expects (DeepSeek concatenates JSON text; Kimi
    // K2 and gpt-oss JSON-print objects).
    tokenizer::RenderedChat rendered = tokenizer::render_chat(
        *tokenizer_, *format_, tokenizer::adapt_tool_arguments(*format_, c.messages), co);
    p.prompt = std::move(rendered.ids);
    too_long = rendered.too_long;
  } catch (const Error& e) {
    invalid("messages", std::string("The messages could not be rendered: ") + e.what(), "invalid_value");
  }
  fill_common(p, c, true, too_long);
  p.id = new_id("chatcmpl-");
  return p;
}

Json Service::run(const PreparedRequest& req, const std::function<bool(const std::string&)>& write,
                  const std::function<bool()>& client_gone) {
  if (shutting_down_) throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
  const bool stream = req.common.stream;
  const model::TargetInfo& info = engine_->info();
  const Json model = limits_.model_id;
  auto send = [&](const std::string& event) {
    if (!write(event)) throw ClientGone{};
  };
  // A chunk shell with one choice (or none, for the usage chunk).
  auto chunk = [&](Json choice) {
    Json j = {{"id", req.id},
              {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", req.created},
              {"model", model}};
    j["choices"] = choice.is_null() ? Json::array() : Json::array({std::move(choice)});
    if (req.common.include_usage) j["usage"] = nullptr;
    return j;
  };
  auto delta_chunk = [&](Json delta) {
    if (req.chat) return chunk(Json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
    return chunk(Json{{"text", std::move(delta)}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
  };

  StopMatcher stop(req.common.stop);
  std::unique_ptr<tokenizer::ReplyStream> reply;
  if (req.chat) reply = std::make_unique<tokenizer::ReplyStream>(*tokenizer_, req.format, req.opened_think);
  tokenizer::Utf8StreamDecoder utf8;
  std::string reasoning, content;  // what the answer holds (non-stream) / has sent (stream)
  size_t pushed_reasoning = 0, pushed_content = 0;  // bytes of the parser's output already taken
  int64_t completion_tokens = 0;

  auto add_reasoning = [&](const std::string& raw) {
    if (raw.empty()) return;
    pushed_reasoning += raw.size();
    std::string text = clean(raw);
    reasoning += text;
    if (stream) send(sse_event(delta_chunk(Json{{"reasoning_content", text}})));
  };
  auto add_content = [&](const std::string& text) {
    if (text.empty()) return;
    content += text;
    if (stream) send(sse_event(req.chat ? delta_chunk(Json{{"content", text}}) : delta_chunk(Json(text))));
  };
  auto add_raw_content = [&](const std::string& raw) {
    if (raw.empty()) return;
    pushed_content += raw.size();
    add_content(stop.push(clean(raw)));
  };

  if (stream && req.chat) send(sse_event(delta_chunk(Json{{"role", "assistant"}, {"content", ""}})));

  // Conversation state reuse: the session continues from its state when the prompt extends it.
  runtime::GenerateOptions go;
  go.max_new = req.max_new;
  go.sampling = req.common.sampling;
  go.stop_at_eos = !req.common.ignore_eos;
  // A client gone or a shutdown stops the generation within one layer, even inside a prefill.
  // Only the watcher calls client_gone while the generation runs.
  std::atomic<bool> cancel{false};
  go.cancel = &cancel;
  std::string finish = "length";
  bool natural_end = false;
  try {
    CancelWatcher watcher(cancel, [&] { return shutting_down_.load() || (client_gone && client_gone()); });
    auto on_token = [&](int32_t id) {
      ++completion_tokens;
      if (req.chat) {
        auto d = reply->push(std::span<const int32_t>(&id, 1));
        add_reasoning(d.reasoning);
        add_raw_content(d.content);
      } else if (!info.is_eos(id)) {
        std::string_view bytes;
        try {
          bytes = tokenizer_->token_bytes(id);
        } catch (const Error&) {
          bytes = {};  // an id the tokenizer does not use decodes to nothing
        }
        add_content(stop.push(utf8.push(bytes)));
      }
      if (stop.hit()) throw StopSequenceHit{};
    };
    runtime::GenerateResult r = session_->generate(req.prompt, go, on_token);
    if (r.stop_reason == "cancelled") {
      // The session has reset its state: the next request prefills afresh and is exact.
      if (shutting_down_) throw ShuttingDown{};
      throw ClientGone{};
    }
    finish = r.stop_reason == "eos" ? "stop" : "length";
    natural_end = true;
  } catch (const StopSequenceHit&) {
    finish = "stop";
  } catch (const ShuttingDown&) {
    if (stream) {
      Json err = error_body(ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down"));
      write(sse_event(err));
    }
    throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
  }
  (void)natural_end;

  // Release what the parsers withheld (the tail of the text, tool calls).
  Json tool_calls = Json::array();
  if (req.chat) {
    tokenizer::ParsedReply parsed = reply->finish();
    if (!stop.hit()) {
      if (parsed.reasoning.size() > pushed_reasoning) add_reasoning(parsed.reasoning.substr(pushed_reasoning));
      if (parsed.content.size() > pushed_content) add_raw_content(parsed.content.substr(pushed_content));
      add_content(stop.flush());
      tool_calls = openai_tool_calls(parsed.tool_calls, [&] { return new_id("call_"); });
    }
  } else if (!stop.hit()) {
    add_content(stop.push(utf8.finish()));
    add_content(stop.flush());
  }
  if (!tool_calls.empty() && finish == "stop") finish = "tool_calls";
  if (tool_calls.empty() && finish != "length") finish = "stop";
  const Json usage = usage_json(int64_t(req.prompt.size()), completion_tokens, int64_t(session_->reused()));
  ++completed_;

  if (stream) {
    if (!tool_calls.empty()) {
      Json deltas = Json::array();
      for (size_t i = 0; i < tool_calls.size(); ++i) {
        Json d = tool_calls[i];
        d["index"] = i;
        deltas.push_back(std::move(d));
      }
      send(sse_event(delta_chunk(Json{{"tool_calls", deltas}})));
    }
    Json last = req.chat ? chunk(Json{{"index", 0}, {"delta", Json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}})
                         : chunk(Json{{"text", ""}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}});
    send(sse_event(last));
    if (req.common.include_usage) {
      Json u = chunk(nullptr);
      u["usage"] = usage;
      send(sse_event(u));
    }
    send(sse_done());
    return nullptr;
  }
  Json choice;
  if (req.chat) {
    Json message = {{"role", "assistant"}, {"content", content}};
    if (content.empty() && !tool_calls.empty()) message["content"] = nullptr;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) message["tool_calls"] = tool_calls;
    choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", finish}};
  } else {
    choice = {{"text", content}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
  }
  return Json{{"id", req.id},
              {"object", req.chat ? "chat.completion" : "text_completion"},
              {"created", req.created},
              {"model", model},
              {"choices", Json::array({choice})},
              {"usage", usage}};
}

}  // namespace sluice::serve
