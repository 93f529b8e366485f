// Helpers shared by the chat renderers and parsers (not part of the public API): Python-flavoured
// JSON printing and truthiness, deep key sorting, the template writer and segment encoding, and the
// per-format renderers and reply parsers.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"

namespace sluice::tokenizer {

// A format's incremental reply parser: feed() appends to `reply` only (never retracts), so
// ReplyStream's deltas are final; finish() releases what was withheld at the end of output.
struct ReplyStream::Parser {
  virtual ~Parser() = default;
  virtual void feed(const Tokenizer& tok, std::span<const int32_t> ids) = 0;
  virtual void finish() = 0;
  ParsedReply reply;
};

namespace chat_detail {

// Jinja / Python truthiness of a JSON value (null, false, 0, "", [], {} are false).
bool truthy(const ChatJson& v);
// Python str(value) for scalars (None, True, False, numbers); JSON text for arrays and objects.
std::string python_str(const ChatJson& v);
// Copy with every object's keys sorted (recursively).
ChatJson deep_sort(const ChatJson& v);
// Text of a message "content": string, null ("") or an array of {"type":"text","text":...} parts.
std::string content_text(const ChatJson& content, const std::string& where);
// The special token id for a spelling, or an error naming the format that needs it.
int32_t require_special(const Tokenizer& tok, const std::string& spelling, const char* format);
// Encodes segments: special ones as their single id, ordinary ones separately with encode_into;
// stops (too_long) once there are more than max_ids ids.
RenderedChat encode_segments(const Tokenizer& tok, std::vector<ChatSegment> segments, const char* format,
                             size_t max_ids);

// Writes a render the way a chat template prints it: trusted template literals, whose special-token
// spellings (from `specials`) become special segments, and untrusted text (message text, names,
// JSON), which is always ordinary. Ordinary text between two specials is one segment, because
// Hugging Face and tiktoken encode the run between two specials at once.
class TemplateWriter {
 public:
  explicit TemplateWriter(std::vector<std::string_view> specials) : specials_(std::move(specials)) {}
  void literal(std::string_view s);
  void text(std::string_view s);
  std::vector<ChatSegment> segments;

 private:
  std::vector<std::string_view> specials_;
};

// A message's string field as Jinja prints it ({{ m[key] }}): missing = "", None = "None".
std::string field_text(const ChatJson& m, const char* key);
// The object holding a tool call's name/arguments: call["function"] when it is an object, else the call.
const ChatJson& call_function(const ChatJson& call);
// Number of Unicode code points of UTF-8 text (Jinja's |length of a string).
size_t code_points(std::string_view s);

RenderedChat render_k3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options);
RenderedChat render_qwen3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options);
RenderedChat render_deepseek_v3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options,
                                bool revision_0324);
RenderedChat render_kimi_k2(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options,
                            bool thinking_template);
RenderedChat render_harmony(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options);
// gpt-oss's "## functions" TypeScript-like namespace of the OpenAI tools (render_tool_namespace).
std::string harmony_tool_namespace(const ChatJson& tools);
// gpt-oss's built-in tool descriptions (render_builtin_tools).
std::string harmony_builtin_tools(bool browser, bool python);

// Reply parsers behind ReplyStream (one per file: chat_parse*.cpp).
std::unique_ptr<ReplyStream::Parser> make_k3_parser(const Tokenizer& tok, bool opened_think);
std::unique_ptr<ReplyStream::Parser> make_qwen3_parser(bool opened_think);
std::unique_ptr<ReplyStream::Parser> make_deepseek_parser(const Tokenizer& tok);
std::unique_ptr<ReplyStream::Parser> make_kimi_k2_parser(const Tokenizer& tok, bool opened_think);
std::unique_ptr<ReplyStream::Parser> make_harmony_parser(const Tokenizer& tok);

}  // namespace chat_detail
}  // namespace sluice::tokenizer
