// OpenAI response shapes: chat.completion / text_completion objects, and their streamed
// chat.completion.chunk / text_completion chunks (role first, reasoning_content and content
// deltas, tool calls in one chunk at the end, one chunk with finish_reason, the usage chunk when
// asked for, then [DONE]).
#include <utility>

#include "serve/reply_writer.h"
#include "serve/sse.h"
#include "tokenizer/utf8.h"

namespace sluice::serve {
namespace {

std::string clean(std::string_view bytes) { return tokenizer::utf8_replace_invalid(bytes); }

Json usage_json(const ReplyEnd& end) {
  return Json{{"prompt_tokens", end.prompt_tokens},
              {"completion_tokens", end.completion_tokens},
              {"total_tokens", end.prompt_tokens + end.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", end.cached_tokens}}}};
}

class OpenAiWriter final : public ReplyWriter {
 public:
  OpenAiWriter(OpenAiShape shape, ReplyContext ctx, Send send)
      : chat_(shape == OpenAiShape::chat), ctx_(std::move(ctx)), send_(std::move(send)) {}

  void begin() override {
    if (ctx_.stream && chat_) send_(sse_event(delta_chunk(Json{{"role", "assistant"}, {"content", ""}})));
  }
  void reasoning(const std::string& text) override {
    reasoning_ += text;
    if (ctx_.stream) send_(sse_event(delta_chunk(Json{{"reasoning_content", text}})));
  }
  void content(const std::string& text) override {
    content_ += text;
    if (ctx_.stream) send_(sse_event(chat_ ? delta_chunk(Json{{"content", text}}) : delta_chunk(Json(text))));
  }

  Json finish(const ReplyEnd& end) override {
    // The service has given every call an id.
    Json tool_calls = openai_tool_calls(end.tool_calls, [] { return std::string("call_"); });
    std::string finish = end.reason == ReplyEnd::Reason::length ? "length" : "stop";
    if (!tool_calls.empty() && end.reason == ReplyEnd::Reason::eos) finish = "tool_calls";
    const Json usage = usage_json(end);
    if (ctx_.stream) {
      if (!tool_calls.empty()) {
        Json deltas = Json::array();
        for (size_t i = 0; i < tool_calls.size(); ++i) {
          Json d = tool_calls[i];
          d["index"] = i;
          deltas.push_back(std::move(d));
        }
        send_(sse_event(delta_chunk(Json{{"tool_calls", deltas}})));
      }
      Json last = chat_ ? chunk(Json{{"index", 0}, {"delta", Json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}})
                        : chunk(Json{{"text", ""}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}});
      last["sluice"] = end.stats.json();
      send_(sse_event(last));
      if (ctx_.include_usage) {
        Json u = chunk(nullptr);
        u["usage"] = usage;
        send_(sse_event(u));
      }
      send_(sse_done());
      return nullptr;
    }
    Json choice;
    if (chat_) {
      Json message = {{"role", "assistant"}, {"content", content_}};
      if (content_.empty() && !tool_calls.empty()) message["content"] = nullptr;
      if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
      if (!tool_calls.empty()) message["tool_calls"] = tool_calls;
      choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", finish}};
    } else {
      choice = {{"text", content_}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
    }
    return Json{{"id", ctx_.id},
                {"object", chat_ ? "chat.completion" : "text_completion"},
                {"created", ctx_.created},
                {"model", ctx_.model},
                {"system_fingerprint", ctx_.system_fingerprint},
                {"choices", Json::array({choice})},
                {"usage", usage},
                {"sluice", end.stats.json()}};
  }

  std::string error_event(const ApiError& e) const override { return sse_event(error_body(e)); }
  const char* tool_id_prefix() const override { return "call_"; }

 private:
  // A chunk shell with one choice (or none, for the usage chunk).
  Json chunk(Json choice) const {
    Json j = {{"id", ctx_.id},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", ctx_.created},
              {"model", ctx_.model},
              {"system_fingerprint", ctx_.system_fingerprint}};
    j["choices"] = choice.is_null() ? Json::array() : Json::array({std::move(choice)});
    if (ctx_.include_usage) j["usage"] = nullptr;
    return j;
  }
  Json delta_chunk(Json delta) const {
    if (chat_)
      return chunk(Json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
    return chunk(Json{{"text", std::move(delta)}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
  }

  bool chat_;
  ReplyContext ctx_;
  Send send_;
  std::string reasoning_, content_;  // what the answer holds (non-stream)
};

}  // namespace

Json openai_tool_calls(const std::vector<tokenizer::ParsedToolCall>& calls, const std::function<std::string()>& new_id) {
  Json out = Json::array();
  for (const auto& c : calls)
    out.push_back(Json{{"id", c.id.empty() ? new_id() : clean(c.id)},
                       {"type", "function"},
                       {"function", {{"name", clean(c.name)}, {"arguments", clean(c.arguments)}}}});
  return out;
}

std::unique_ptr<ReplyWriter> make_openai_writer(OpenAiShape shape, ReplyContext ctx, ReplyWriter::Send send) {
  return std::make_unique<OpenAiWriter>(shape, std::move(ctx), std::move(send));
}

}  // namespace sluice::serve
