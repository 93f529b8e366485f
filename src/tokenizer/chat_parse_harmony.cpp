// gpt-oss (harmony) reply parser. The prompt ends in "<|start|>assistant", so the reply opens with
// the rest of a message header: [" to=RECIPIENT"] <|channel|>CHANNEL [" to=RECIPIENT"]
// [" <|constrain|>json" | " json"] <|message|>, then the body up to <|end|> (another message follows,
// after <|start|>assistant), <|call|> (a tool call: the reply ends) or <|return|> (the reply ends).
// Bodies on the analysis channel are reasoning; a body addressed to functions.NAME is a tool call
// with that body as its arguments; other bodies (final, commentary preambles) are content. Markers
// are single special tokens, so header text never reaches the reply.
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

// The first whitespace-delimited word of `s` at or after `pos`.
std::string word_at(std::string_view s, size_t pos) {
  size_t b = s.find_first_not_of(" \t\r\n", pos);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_first_of(" \t\r\n", b);
  return std::string(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
}

class HarmonyParser final : public ReplyStream::Parser {
 public:
  explicit HarmonyParser(const Tokenizer& tok)
      : start_(tok.special_id("<|start|>")),
        channel_(tok.special_id("<|channel|>")),
        constrain_(tok.special_id("<|constrain|>")),
        message_(tok.special_id("<|message|>")),
        end_(tok.special_id("<|end|>")),
        call_(tok.special_id("<|call|>")),
        return_(tok.special_id("<|return|>")) {}

  void feed(const Tokenizer& tok, std::span<const int32_t> ids) override {
    for (int32_t id : ids) {
      if (reply.complete) return;
      if (id == start_) {
        begin_header();
      } else if (id == channel_ && in_header_) {
        header_ += '\x1f';  // where the channel name starts
      } else if (id == constrain_ && in_header_) {
        header_ += ' ';
      } else if (id == message_ && in_header_) {
        open_body();
      } else if (id == end_ || id == call_ || id == return_) {
        close_body();
        reply.complete = id != end_;
        begin_header();
        in_header_ = false;  // until the next <|start|>
      } else if (!tok.is_special(id)) {
        std::string_view bytes = tok.generated_bytes(id);
        if (in_header_) header_ += bytes;
        else if (kind_ == Body::reasoning) reply.reasoning += bytes;
        else if (kind_ == Body::content) reply.content += bytes;
        else if (kind_ == Body::call) arguments_ += bytes;
      }
    }
  }
  // A call cut off before <|call|> is not reported (its arguments may be partial).
  void finish() override {}

 private:
  enum class Body { none, reasoning, content, call };

  void begin_header() {
    in_header_ = true;
    header_.clear();
  }

  void open_body() {
    in_header_ = false;
    std::string_view h = header_;
    size_t to = h.find("to=");
    std::string recipient = to == std::string_view::npos ? "" : word_at(h, to + 3);
    recipient = recipient.substr(0, recipient.find('\x1f'));
    size_t ch = h.find('\x1f');
    std::string channel = ch == std::string_view::npos ? "" : word_at(h, ch + 1);
    if (!recipient.empty() && recipient != "assistant" && recipient != "user") {
      kind_ = Body::call;
      call_name_ = recipient.rfind("functions.", 0) == 0 ? recipient.substr(10) : recipient;
      arguments_.clear();
    } else if (channel == "analysis") {
      // Successive analysis messages are one reasoning text, a line apart.
      if (!reply.reasoning.empty()) reply.reasoning += '\n';
      kind_ = Body::reasoning;
    } else {
      if (!reply.content.empty()) reply.content += '\n';
      kind_ = Body::content;
    }
  }

  void close_body() {
    if (kind_ == Body::call) reply.tool_calls.push_back(ParsedToolCall{call_name_, arguments_, ""});
    kind_ = Body::none;
  }

  std::optional<int32_t> start_, channel_, constrain_, message_, end_, call_, return_;
  // The prompt ended in "<|start|>assistant": the reply begins inside a header.
  bool in_header_ = true;
  std::string header_, call_name_, arguments_;
  Body kind_ = Body::none;
};

}  // namespace

std::unique_ptr<ReplyStream::Parser> make_harmony_parser(const Tokenizer& tok) {
  return std::make_unique<HarmonyParser>(tok);
}

}  // namespace sluice::tokenizer::chat_detail
