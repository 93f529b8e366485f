// The Anthropic Messages writer: one block state machine serves both the streamed events and the
// whole message, so a stream and a JSON reply to the same request carry the same blocks.
#include "serve/anthropic_reply.h"

#include <utility>

#include "fetch/sha256.h"
#include "format/json_util.h"
#include "serve/sse.h"
#include "tokenizer/utf8.h"

namespace sluice::serve {
namespace {

class AnthropicWriter final : public ReplyWriter {
 public:
  AnthropicWriter(ReplyContext ctx, Send send) : ctx_(std::move(ctx)), send_(std::move(send)) {}

  void begin() override {
    if (!ctx_.stream) return;
    Json message = shell();
    message["usage"] = usage(ctx_.prompt_tokens, 0, 0);
    send_(sse_named_event(Json{{"type", "message_start"}, {"message", std::move(message)}}));
    send_(sse_named_event(Json{{"type", "ping"}}));
  }
  void reasoning(const std::string& text) override {
    if (ctx_.show_reasoning) append(Kind::thinking, text);
  }
  void content(const std::string& text) override { append(Kind::text, text); }

  Json finish(const ReplyEnd& end) override {
    close_block();
    for (const auto& call : end.tool_calls) {
      Json input = tool_use_input(call.arguments);
      Json block = {{"type", "tool_use"},
                    {"id", tokenizer::utf8_replace_invalid(call.id)},
                    {"name", tokenizer::utf8_replace_invalid(call.name)},
                    {"input", Json::object()}};
      if (ctx_.stream) {
        const size_t index = next_index_++;
        send_(sse_named_event(Json{{"type", "content_block_start"}, {"index", index}, {"content_block", block}}));
        send_(sse_named_event(Json{{"type", "content_block_delta"},
                                   {"index", index},
                                   {"delta", {{"type", "input_json_delta"}, {"partial_json", dump_json(input)}}}}));
        send_(sse_named_event(Json{{"type", "content_block_stop"}, {"index", index}}));
      } else {
        block["input"] = std::move(input);
        blocks_.push_back(std::move(block));
      }
    }
    std::string reason = "max_tokens";
    Json stop_sequence = nullptr;
    if (end.reason == ReplyEnd::Reason::eos) reason = end.tool_calls.empty() ? "end_turn" : "tool_use";
    if (end.reason == ReplyEnd::Reason::stop_sequence) {
      reason = "stop_sequence";
      stop_sequence = end.stop_sequence;
    }
    const Json u = usage(end.prompt_tokens - end.cached_tokens, end.cached_tokens, end.completion_tokens);
    if (ctx_.stream) {
      send_(sse_named_event(Json{{"type", "message_delta"},
                                 {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence}}},
                                 {"usage", u},
                                 {"sluice", end.stats.json()}}));
      send_(sse_named_event(Json{{"type", "message_stop"}}));
      return nullptr;
    }
    Json message = shell();
    message["content"] = std::move(blocks_);
    message["stop_reason"] = reason;
    message["stop_sequence"] = stop_sequence;
    message["usage"] = u;
    message["sluice"] = end.stats.json();
    return message;
  }

  std::string error_event(const ApiError& e) const override { return sse_named_event(anthropic_error_body(e)); }
  const char* tool_id_prefix() const override { return "toolu_"; }

 private:
  enum class Kind { none, thinking, text };

  Json shell() const {
    return Json{{"id", ctx_.id},           {"type", "message"},        {"role", "assistant"},
                {"model", ctx_.model},     {"content", Json::array()}, {"stop_reason", nullptr},
                {"stop_sequence", nullptr}};
  }
  static Json usage(int64_t input, int64_t cached, int64_t output) {
    return Json{{"input_tokens", input},
                {"cache_creation_input_tokens", 0},
                {"cache_read_input_tokens", cached},
                {"output_tokens", output}};
  }

  void append(Kind kind, const std::string& text) {
    if (open_ != kind) {
      close_block();
      open_block(kind);
    }
    const char* field = kind == Kind::thinking ? "thinking" : "text";
    if (kind == Kind::thinking) thinking_ += text;
    if (ctx_.stream) {
      const char* delta = kind == Kind::thinking ? "thinking_delta" : "text_delta";
      send_(sse_named_event(
          Json{{"type", "content_block_delta"}, {"index", next_index_ - 1}, {"delta", {{"type", delta}, {field, text}}}}));
    } else {
      blocks_.back()[field].get_ref<std::string&>() += text;
    }
  }
  void open_block(Kind kind) {
    // A thinking block's signature comes when it closes (signature_delta in a stream).
    Json block = kind == Kind::thinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                        : Json{{"type", "text"}, {"text", ""}};
    thinking_.clear();
    open_ = kind;
    const size_t index = next_index_++;
    if (ctx_.stream)
      send_(sse_named_event(Json{{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(block)}}));
    else
      blocks_.push_back(std::move(block));
  }
  void close_block() {
    if (open_ == Kind::none) return;
    const Kind was = open_;
    open_ = Kind::none;
    if (was == Kind::thinking) {
      const std::string signature = thinking_signature(thinking_);
      if (ctx_.stream)
        send_(sse_named_event(Json{{"type", "content_block_delta"},
                                   {"index", next_index_ - 1},
                                   {"delta", {{"type", "signature_delta"}, {"signature", signature}}}}));
      else
        blocks_.back()["signature"] = signature;
    }
    if (ctx_.stream) send_(sse_named_event(Json{{"type", "content_block_stop"}, {"index", next_index_ - 1}}));
  }

  ReplyContext ctx_;
  Send send_;
  Kind open_ = Kind::none;
  std::string thinking_;  // the open thinking block's text (for its signature)
  size_t next_index_ = 0;
  Json blocks_ = Json::array();  // the message's content (non-stream)
};

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

Json anthropic_error_body(const ApiError& e) {
  return Json{{"type", "error"}, {"error", {{"type", error_type(e.status)}, {"message", e.message}}}};
}

std::string thinking_signature(const std::string& thinking) {
  fetch::Sha256 h;
  h.update(thinking.data(), thinking.size());
  return "sluice-sha256:" + h.hex();
}

Json tool_use_input(const std::string& arguments) {
  if (arguments.find_first_not_of(" \t\r\n") == std::string::npos) return Json::object();
  Json parsed = format::parse_json_or_discarded<Json>(arguments);
  if (!parsed.is_discarded() && parsed.is_object()) return parsed;
  return Json{{"arguments_text", tokenizer::utf8_replace_invalid(arguments)}};
}

std::unique_ptr<ReplyWriter> make_anthropic_writer(ReplyContext ctx, ReplyWriter::Send send) {
  return std::make_unique<AnthropicWriter>(std::move(ctx), std::move(send));
}

}  // namespace sluice::serve
