// The serving core behind the HTTP routes: the engine, the tokenizer and chat format, request
// preparation (validation, rendering, context limits) for the OpenAI and Anthropic routes,
// admission (one generation at a time, a bounded line), conversation state reuse, the generation
// of one response (shaped by a ReplyWriter as JSON or SSE events), and the counters the telemetry
// stream samples. Knows nothing of sockets: the HTTP layer passes a writer and a "client gone" check.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/guided_reply.h"
#include "serve/admission.h"
#include "serve/openai_request.h"
#include "serve/reply_writer.h"
#include "serve/telemetry.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace sluice::serve {

struct ServeOptions {
  runtime::EngineOptions engine;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;               // empty: no check
  std::string model_id;              // empty: the model directory's name
  int64_t max_tokens = 1'000'000;    // cap on generated tokens per request
  int64_t default_max_tokens = 4096; // chat requests without max_tokens
  size_t max_connections = 2048;     // open at once (idle ones need no thread); more: 503, closed
  size_t max_connections_per_client = 256;  // open at once from one address; more: 503, closed
  size_t max_requests = 256;         // read or answered at once, one thread each; more: 503
  int header_timeout_s = 10;         // total time to receive a request's headers
  int body_timeout_s = 30;           // a body's time, plus 1 s per 64 KiB of it
  int64_t max_context = 32768;       // prompt + generated tokens
  size_t queue = 0;                  // requests that may wait while one generates
  size_t max_request_bytes = size_t(128) << 20;
  // Request bodies above 1 MiB being read or served, in total (0: (queue + 1) * max_request_bytes,
  // as many large bodies as may be admitted; never less than max_request_bytes): one that would
  // pass it is read away and answered 429, so concurrent large prompts cannot take the server's
  // memory (each costs a few times its size while parsed).
  size_t max_request_bytes_in_flight = 0;
  bool state_reuse = true;
  // A chat format name (tokenizer::chat_format_name); empty: detected from the tokenizer and the
  // model directory's chat template.
  std::string chat_format;
  // GET /v1/telemetry streams open at once (each holds a connection); more are answered 429.
  size_t telemetry_streams = 4;
  // A stream silent this long while it generates gets an SSE comment (Service::run; 0: after
  // every token, for tests).
  int64_t heartbeat_ms = 1000;
};

// The API a request came through (its parser and its response shape).
enum class Api { completion, chat, messages, responses };

// A validated, tokenized request ready to run.
struct PreparedRequest {
  Api api = Api::completion;
  CommonRequest common;
  std::vector<int32_t> prompt;
  int64_t max_new = 0;
  tokenizer::ChatFormat format = tokenizer::ChatFormat::kimi_k3;
  bool opened_think = false;
  bool show_reasoning = true;  // ReplyContext::show_reasoning
  // response_format json_object / json_schema: the reply's grammar (no grammar: free text).
  runtime::GuidedReply guided;
  Json echo;  // Api::responses: what the response object repeats of the request
  std::string id;
  int64_t created = 0;
};

// Thrown out of a generation whose client went away (nothing more can be sent to it).
struct ClientGone {};

class Service {
 public:
  explicit Service(const ServeOptions& options);
  ~Service();

  const ServeOptions& options() const { return opt_; }
  const RequestLimits& limits() const { return limits_; }
  Admission& admission() { return admission_; }

  Json models_json() const;
  Json health_json() const;

  // Throw ApiError (400/404) for bad requests. `admit` runs once the body is validated and before
  // the prompt is tokenized (the costly part: a 100 MB prompt is seconds of work and gigabytes),
  // so that the HTTP layer takes the request's admission place first and refuses it (429) rather
  // than tokenize prompts that will not run; it throws ApiError to refuse.
  PreparedRequest prepare_completion(const std::string& body, const std::function<void()>& admit = {});
  PreparedRequest prepare_chat(const std::string& body, const std::function<void()>& admit = {});
  // POST /v1/messages (Anthropic); errors carry the same statuses, shaped by the HTTP layer.
  PreparedRequest prepare_messages(const std::string& body, const std::function<void()>& admit = {});
  // POST /v1/responses (OpenAI's Responses API, mapped onto a chat request: responses_request.h).
  PreparedRequest prepare_responses(const std::string& body, const std::function<void()>& admit = {});
  // POST /v1/messages/count_tokens: {"input_tokens": the prompt's tokens as a Messages request with
  // this body would render them}. Uses the tokenizer only (no slot, no engine).
  Json count_message_tokens(const std::string& body);

  // Runs a request; the caller holds the admission turn. Streaming requests send every SSE event
  // through `write` (false = the client is gone) and return null; others return the response JSON.
  // `client_gone` is polled every 50 ms from a watcher thread while the request runs (prefill
  // included; the caller must not use what it checks meanwhile); once it says so, or the server
  // begins shutting down, the generation stops within one layer. Throws ClientGone, or
  // ApiError(503) when the server is shutting down (streams get an error event first).
  Json run(const PreparedRequest& req, const std::function<bool(const std::string&)>& write,
           const std::function<bool()>& client_gone);

  // Stops the running generation within one layer (its watcher sees this within 50 ms) and
  // refuses new ones (503).
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }

  // Counters for /health and tests.
  int64_t completed() const { return completed_; }

  // What GET /v1/telemetry reports, sampled now (any thread).
  TelemetrySample telemetry_sample() const;
  // A place for one telemetry stream (held while the pointer lives), or null when
  // --telemetry-streams are open already.
  std::shared_ptr<void> open_telemetry_stream() { return telemetry_slots_.try_take(); }

 private:
  // too_long: the tokenizer stopped because the prompt has more ids than the context allows.
  void fill_common(PreparedRequest& p, const CommonRequest& c, bool chat, bool too_long);
  PreparedRequest prepare_chat_request(ChatRequest c, tokenizer::ChatOptions co, const std::function<void()>& admit,
                                       Api api);
  // The prompt of a chat request rendered in the model's format (400 when it cannot be).
  tokenizer::RenderedChat render(const ChatRequest& c, const tokenizer::ChatOptions& co) const;
  runtime::GuidedReply guided_format(const Json& response_format, bool thinking) const;
  runtime::GuidedReply guided_tools(const ChatRequest& c, bool thinking) const;
  // {token, logprob, bytes}: a token's text (invalid UTF-8 replaced), its exact bytes, a value.
  Json token_logprob(int32_t id, float logprob) const;
  // Publishes the store's counters for the telemetry stream (on the generating thread).
  void publish_store_counters();
  std::string new_id(const char* prefix);

  ServeOptions opt_;
  RequestLimits limits_;
  std::string fingerprint_;  // ReplyContext::system_fingerprint
  std::unique_ptr<runtime::Engine> engine_;
  const tokenizer::Tokenizer* tokenizer_ = nullptr;  // the engine's
  std::optional<tokenizer::ChatFormat> format_;
  Admission admission_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> generated_tokens_{0};
  mutable std::mutex store_mu_;
  StoreSample store_sample_;  // the store's counters as of the last token (store_mu_)
  TierSample tier_sample_;    // the device tier's, likewise (store_mu_)
  StreamSlots telemetry_slots_;
  std::mutex id_mu_;
  std::mt19937_64 id_rng_;

  // The one sequence; it keeps its state between requests for conversation reuse (touched only by
  // the request holding the admission turn).
  std::unique_ptr<runtime::Session> session_;
};

}  // namespace sluice::serve
