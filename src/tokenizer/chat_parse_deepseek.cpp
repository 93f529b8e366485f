// DeepSeek-V3 reply parser: content, then tool calls as the template writes them
// (<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
// ... <｜tool▁calls▁end｜>), ending at <｜end▁of▁sentence｜>. The markers are single added tokens, so the
// parser works on ids: a marker can never be split or spelled by ordinary text.
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

std::optional<int32_t> id_of(const Tokenizer& tok, const char* spelling) { return tok.special_id(spelling); }

// "NAME\n```json\nARGS\n```" -> name and arguments (anything else: the text after the first line).
ParsedToolCall split_call(const std::string& body) {
  ParsedToolCall call;
  size_t nl = body.find('\n');
  call.name = body.substr(0, nl);
  std::string rest = nl == std::string::npos ? std::string() : body.substr(nl + 1);
  for (const char* fence : {"```json\n", "```\n"})
    if (rest.rfind(fence, 0) == 0) {
      rest.erase(0, std::string_view(fence).size());
      break;
    }
  if (rest.size() >= 4 && rest.compare(rest.size() - 4, 4, "\n```") == 0) rest.resize(rest.size() - 4);
  else if (rest.size() >= 3 && rest.compare(rest.size() - 3, 3, "```") == 0) rest.resize(rest.size() - 3);
  size_t b = rest.find_first_not_of(" \t\r\n"), e = rest.find_last_not_of(" \t\r\n");
  call.arguments = b == std::string::npos ? std::string() : rest.substr(b, e - b + 1);
  return call;
}

class DeepSeekParser final : public ReplyStream::Parser {
 public:
  explicit DeepSeekParser(const Tokenizer& tok)
      : eos_(id_of(tok, "<｜end▁of▁sentence｜>")),
        call_begin_(id_of(tok, "<｜tool▁call▁begin｜>")),
        call_end_(id_of(tok, "<｜tool▁call▁end｜>")),
        sep_(id_of(tok, "<｜tool▁sep｜>")),
        calls_begin_(id_of(tok, "<｜tool▁calls▁begin｜>")),
        calls_end_(id_of(tok, "<｜tool▁calls▁end｜>")) {}

  void feed(const Tokenizer& tok, std::span<const int32_t> ids) override {
    for (int32_t id : ids) {
      if (reply.complete) return;
      if (id == eos_) {
        reply.complete = true;
      } else if (id == calls_begin_) {
        in_section_ = true;
      } else if (id == calls_end_) {
        in_section_ = false;
      } else if (id == call_begin_) {
        in_call_ = true;
        after_sep_ = false;
        body_.clear();
      } else if (id == sep_) {
        after_sep_ = in_call_;
      } else if (id == call_end_) {
        if (in_call_) reply.tool_calls.push_back(split_call(body_));
        in_call_ = false;
      } else if (!tok.is_special(id)) {
        std::string_view bytes = tok.generated_bytes(id);
        if (in_call_) {
          if (after_sep_) body_ += bytes;  // the type before <｜tool▁sep｜> is always "function"
        } else if (!in_section_) {
          reply.content += bytes;
        }
      }
    }
  }
  void finish() override {}

 private:
  std::optional<int32_t> eos_, call_begin_, call_end_, sep_, calls_begin_, calls_end_;
  bool in_section_ = false, in_call_ = false, after_sep_ = false;
  std::string body_;
};

}  // namespace

std::unique_ptr<ReplyStream::Parser> make_deepseek_parser(const Tokenizer& tok) {
  return std::make_unique<DeepSeekParser>(tok);
}

}  // namespace sluice::tokenizer::chat_detail
