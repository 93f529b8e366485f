// How one generation becomes one API's response. The service decides the tokens and splits them
// into reasoning and answer text (stop sequences applied) and, at the end, tool calls; a writer
// shapes those pieces as OpenAI chat / completion chunks or Anthropic Messages events while
// streaming, and as the whole response JSON otherwise. Writers know nothing of the engine.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serve/openai_request.h"
#include "tokenizer/chat.h"

namespace sluice::serve {

// Per-request measurements, reported as the response's "sluice" object.
struct ReplyStats {
  double ttft_ms = 0;       // from the start of the generation (its turn) to the first token
  double prefill_ms = 0, decode_ms = 0;
  int64_t decoded = 0;      // tokens after the first
  int64_t drafts_proposed = 0, drafts_accepted = 0;
  uint64_t bytes_read = 0;  // routed-expert bytes read from drives during the request
  Json json() const;
};

struct ReplyEnd {
  enum class Reason { eos, length, stop_sequence };
  Reason reason = Reason::length;
  std::string stop_sequence;  // the one that matched (Reason::stop_sequence)
  // Ids filled in (the model's own where the format has them, else new ones).
  std::vector<tokenizer::ParsedToolCall> tool_calls;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens continued from the kept state
  ReplyStats stats;
};

// What a writer needs to know of its request.
struct ReplyContext {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  int64_t prompt_tokens = 0;
  // Whether the model's reasoning goes to the client (Anthropic Messages: only when the request
  // enabled thinking; a model that always reasons still does, and the reply leaves it out).
  bool show_reasoning = true;
  // OpenAI's system_fingerprint: which engine build, model and device produced the reply (two
  // replies with the same fingerprint and seed are the same computation).
  std::string system_fingerprint;
  bool logprobs = false;  // the response carries log-probabilities (ReplyWriter::logprobs)
};

class ReplyWriter {
 public:
  // Sends one SSE event; throws ClientGone when the client is gone.
  using Send = std::function<void(const std::string&)>;
  virtual ~ReplyWriter() = default;
  // Before the first token (streams: the opening events).
  virtual void begin() = 0;
  // Text to append; never empty, valid UTF-8.
  virtual void reasoning(const std::string& text) = 0;
  virtual void content(const std::string& text) = 0;
  // A generated token's log-probabilities ({token, logprob, bytes, top_logprobs: [{token, logprob,
  // bytes}]}), in order, when the request asked for them (ReplyContext::logprobs). Only OpenAI's
  // chat and completions requests can ask; the other writers are never given any.
  virtual void logprobs(const Json& /*entry*/) {}
  // The last events of a stream (returns null), or the whole response.
  virtual Json finish(const ReplyEnd& end) = 0;
  // The event that ends a stream cut short by `e` (a shutdown).
  virtual std::string error_event(const ApiError& e) const = 0;
  // The prefix of new tool-call ids ("call_", "toolu_").
  virtual const char* tool_id_prefix() const = 0;
};

// Parsed tool calls as OpenAI `tool_calls` entries ({id, type: "function", function: {name,
// arguments}}), ids from `new_id` where a call has none; text is made valid UTF-8.
Json openai_tool_calls(const std::vector<tokenizer::ParsedToolCall>& calls, const std::function<std::string()>& new_id);

enum class OpenAiShape { completion, chat };
std::unique_ptr<ReplyWriter> make_openai_writer(OpenAiShape shape, ReplyContext ctx, ReplyWriter::Send send);

}  // namespace sluice::serve
