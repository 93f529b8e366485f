// Kimi K2 reply parser: an optional <think>reasoning</think> (K2-Thinking), content, then a tool-call
// section (<|tool_calls_section_begin|> <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>
// ARGS<|tool_call_end|> ... <|tool_calls_section_end|>), ending at <|im_end|>. The markers are single
// special tokens, so the parser works on ids. A call keeps the model's id, which the next turn's
// template writes back.
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

std::string trimmed(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// "functions.get_weather:0" -> "get_weather".
std::string name_from_id(const std::string& id) {
  std::string name = id.rfind("functions.", 0) == 0 ? id.substr(10) : id;
  size_t colon = name.rfind(':');
  if (colon != std::string::npos && colon + 1 < name.size() &&
      name.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    name.resize(colon);
  return name;
}

class KimiK2Parser final : public ReplyStream::Parser {
 public:
  KimiK2Parser(const Tokenizer& tok, bool opened_think)
      : end_(tok.special_id("<|im_end|>")),
        think_(tok.special_id("<think>")),
        think_end_(tok.special_id("</think>")),
        section_begin_(tok.special_id("<|tool_calls_section_begin|>")),
        section_end_(tok.special_id("<|tool_calls_section_end|>")),
        call_begin_(tok.special_id("<|tool_call_begin|>")),
        argument_begin_(tok.special_id("<|tool_call_argument_begin|>")),
        call_end_(tok.special_id("<|tool_call_end|>")),
        mode_(opened_think ? Mode::reasoning : Mode::content) {}

  void feed(const Tokenizer& tok, std::span<const int32_t> ids) override {
    for (int32_t id : ids) {
      if (reply.complete) return;
      if (id == end_) {
        reply.complete = true;
      } else if (id == think_ && mode_ != Mode::section) {
        mode_ = Mode::reasoning;
      } else if (id == think_end_ && mode_ == Mode::reasoning) {
        mode_ = Mode::content;
      } else if (id == section_begin_) {
        mode_ = Mode::section;
      } else if (id == section_end_) {
        mode_ = Mode::content;
      } else if (id == call_begin_) {
        mode_ = Mode::call_id;
        call_id_.clear();
        arguments_.clear();
      } else if (id == argument_begin_ && mode_ == Mode::call_id) {
        mode_ = Mode::arguments;
      } else if (id == call_end_ && (mode_ == Mode::arguments || mode_ == Mode::call_id)) {
        std::string call_id = trimmed(call_id_);
        reply.tool_calls.push_back(ParsedToolCall{name_from_id(call_id), trimmed(arguments_), call_id});
        mode_ = Mode::section;
      } else if (!tok.is_special(id)) {
        std::string_view bytes = tok.generated_bytes(id);
        if (mode_ == Mode::reasoning) reply.reasoning += bytes;
        else if (mode_ == Mode::content) reply.content += bytes;
        else if (mode_ == Mode::call_id) call_id_ += bytes;
        else if (mode_ == Mode::arguments) arguments_ += bytes;
      }
    }
  }
  void finish() override {}

 private:
  enum class Mode { reasoning, content, section, call_id, arguments };
  std::optional<int32_t> end_, think_, think_end_, section_begin_, section_end_, call_begin_, argument_begin_, call_end_;
  Mode mode_;
  std::string call_id_, arguments_;
};

}  // namespace

std::unique_ptr<ReplyStream::Parser> make_kimi_k2_parser(const Tokenizer& tok, bool opened_think) {
  return std::make_unique<KimiK2Parser>(tok, opened_think);
}

}  // namespace sluice::tokenizer::chat_detail
