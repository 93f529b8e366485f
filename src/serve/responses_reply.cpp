// The Responses API writer: one item state machine serves the streamed events and the whole
// response object, so a stream and a JSON reply to the same request carry the same output items.
#include "serve/responses_reply.h"

#include <utility>

#include "serve/sse.h"
#include "tokenizer/utf8.h"

namespace sluice::serve {
namespace {

std::string clean(std::string_view bytes) { return tokenizer::utf8_replace_invalid(bytes); }

class ResponsesWriter final : public ReplyWriter {
 public:
  ResponsesWriter(ReplyContext ctx, Json echo, Send send)
      : ctx_(std::move(ctx)), echo_(std::move(echo)), send_(std::move(send)) {}

  void begin() override {
    if (!ctx_.stream) return;
    Json r = response("in_progress");
    event({{"type", "response.created"}, {"response", r}});
    event({{"type", "response.in_progress"}, {"response", std::move(r)}});
  }
  void reasoning(const std::string& text) override {
    if (ctx_.show_reasoning) append(Kind::reasoning, text);
  }
  void content(const std::string& text) override { append(Kind::message, text); }

  Json finish(const ReplyEnd& end) override {
    close();
    for (const auto& call : end.tool_calls) {
      const std::string id = "fc_" + call.id;
      const std::string arguments = clean(call.arguments);
      Json item = {{"id", id},           {"type", "function_call"}, {"status", "in_progress"},
                   {"arguments", ""},    {"call_id", clean(call.id)}, {"name", clean(call.name)}};
      const size_t index = output_.size();
      event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}});
      event({{"type", "response.function_call_arguments.delta"},
             {"item_id", id},
             {"output_index", index},
             {"delta", arguments}});
      event({{"type", "response.function_call_arguments.done"},
             {"item_id", id},
             {"output_index", index},
             {"arguments", arguments}});
      item["status"] = "completed";
      item["arguments"] = arguments;
      event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
      output_.push_back(std::move(item));
    }
    // Cut at max_output_tokens: incomplete, as the API reports it.
    const bool cut = end.reason == ReplyEnd::Reason::length;
    Json r = response(cut ? "incomplete" : "completed");
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["usage"] = {{"input_tokens", end.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", end.cached_tokens}}},
                  {"output_tokens", end.completion_tokens},
                  {"total_tokens", end.prompt_tokens + end.completion_tokens}};
    r["sluice"] = end.stats.json();
    if (!ctx_.stream) return r;
    event({{"type", cut ? "response.incomplete" : "response.completed"}, {"response", std::move(r)}});
    return nullptr;
  }

  std::string error_event(const ApiError& e) const override {
    Json j = {{"type", "error"}, {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}, {"message", e.message},
              {"param", e.param.empty() ? Json(nullptr) : Json(e.param)}, {"sequence_number", sequence_}};
    return sse_named_event(j);
  }
  const char* tool_id_prefix() const override { return "call_"; }

 private:
  enum class Kind { none, reasoning, message };

  // The response object as it stands: status, the output items finished so far, the request's
  // settings repeated.
  Json response(const std::string& status) const {
    Json r = {{"id", ctx_.id},
              {"object", "response"},
              {"created_at", ctx_.created},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"model", ctx_.model},
              {"output", output_},
              {"previous_response_id", nullptr},
              {"store", false}};
    for (auto f = echo_.begin(); f != echo_.end(); ++f) r[f.key()] = f.value();
    r["usage"] = nullptr;
    return r;
  }

  // Streams send each event with its sequence number; a whole reply only builds the items.
  void event(Json j) {
    if (!ctx_.stream) return;
    j["sequence_number"] = sequence_++;
    send_(sse_named_event(j));
  }

  // Text to the open item of `kind` (opened after closing another kind), and its delta event.
  void append(Kind kind, const std::string& text) {
    open(kind);
    text_ += text;
    Json delta = {{"type", kind == Kind::message ? "response.output_text.delta" : "response.reasoning_text.delta"},
                  {"item_id", item_id_},
                  {"output_index", output_.size()},
                  {"content_index", 0},
                  {"delta", text}};
    if (kind == Kind::message) delta["logprobs"] = Json::array();
    event(std::move(delta));
  }

  // The item that text of `kind` goes to: the open one, or a new one after closing it.
  void open(Kind kind) {
    if (kind_ == kind) return;
    close();
    kind_ = kind;
    item_id_ = (kind == Kind::message ? "msg_" : "rs_") + ctx_.id.substr(ctx_.id.find('_') + 1) + "_" +
               std::to_string(output_.size());
    const size_t index = output_.size();
    event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item(Json::array(), "in_progress")}});
    event({{"type", "response.content_part.added"},
           {"item_id", item_id_},
           {"output_index", index},
           {"content_index", 0},
           {"part", part("")}});
  }
  void close() {
    if (kind_ == Kind::none) return;
    const size_t index = output_.size();
    event({{"type", kind_ == Kind::message ? "response.output_text.done" : "response.reasoning_text.done"},
           {"item_id", item_id_},
           {"output_index", index},
           {"content_index", 0},
           {"text", text_}});
    event({{"type", "response.content_part.done"},
           {"item_id", item_id_},
           {"output_index", index},
           {"content_index", 0},
           {"part", part(text_)}});
    Json done = item(Json::array({part(text_)}), "completed");
    event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", done}});
    output_.push_back(std::move(done));
    kind_ = Kind::none;
    text_.clear();
  }
  Json part(const std::string& text) const {
    if (kind_ == Kind::reasoning) return {{"type", "reasoning_text"}, {"text", text}};
    return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
  }
  Json item(Json content, const char* status) const {
    if (kind_ == Kind::reasoning)
      return {{"id", item_id_}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", std::move(content)}};
    return {{"id", item_id_},
            {"type", "message"},
            {"status", status},
            {"role", "assistant"},
            {"content", std::move(content)}};
  }

  ReplyContext ctx_;
  Json echo_;
  Send send_;
  Json output_ = Json::array();  // finished items
  Kind kind_ = Kind::none;       // the open item
  std::string item_id_, text_;   // its id and text so far
  int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<ReplyWriter> make_responses_writer(ReplyContext ctx, Json echo, ReplyWriter::Send send) {
  return std::make_unique<ResponsesWriter>(std::move(ctx), std::move(echo), std::move(send));
}

}  // namespace sluice::serve
