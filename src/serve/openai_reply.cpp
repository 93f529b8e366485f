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
  // A stream sends each token's entry with the next chunk (text lags tokens: the reply parser and
  // stop sequences withhold some); a whole response lists them all.
  void logprobs(const Json& entry) override { pending_.push_back(entry); }

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
      Json last = chat_ ? chunk(Json{{"index", 0}, {"delta", Json::object()}, {"logprobs", take()}, {"finish_reason", finish}})
                        : chunk(Json{{"text", ""}, {"index", 0}, {"logprobs", take()}, {"finish_reason", finish}});
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
      choice = {{"index", 0}, {"message", message}, {"logprobs", take()}, {"finish_reason", finish}};
    } else {
      choice = {{"text", content_}, {"index", 0}, {"logprobs", take()}, {"finish_reason", finish}};
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
  Json delta_chunk(Json delta) {
    if (chat_)
      return chunk(Json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", take()}, {"finish_reason", nullptr}});
    return chunk(Json{{"text", std::move(delta)}, {"index", 0}, {"logprobs", take()}, {"finish_reason", nullptr}});
  }
  // The entries not sent yet in the shape of this API (null without logprobs): chat's
  // {content: [entries], refusal: null}, completions' parallel arrays with byte offsets into the text.
  Json take() {
    if (!ctx_.logprobs) return nullptr;
    Json out;
    if (chat_) {
      out = {{"content", std::move(pending_)}, {"refusal", nullptr}};
    } else {
      Json tokens = Json::array(), values = Json::array(), top = Json::array(), offsets = Json::array();
      for (const Json& e : pending_) {
        tokens.push_back(e["token"]);
        values.push_back(e["logprob"]);
        Json alternatives = Json::object();
        for (const Json& a : e["top_logprobs"]) alternatives[a["token"].get<std::string>()] = a["logprob"];
        top.push_back(std::move(alternatives));
        offsets.push_back(text_offset_);
        text_offset_ += int64_t(e["token"].get_ref<const std::string&>().size());
      }
      out = {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", top}, {"text_offset", offsets}};
    }
    pending_ = Json::array();
    return out;
  }

  bool chat_;
  ReplyContext ctx_;
  Send send_;
  std::string reasoning_, content_;  // what the answer holds (non-stream)
  Json pending_ = Json::array();     // log-probability entries not sent yet
  int64_t text_offset_ = 0;          // completions: bytes of the tokens sent so far
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
