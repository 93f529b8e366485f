// Chat rendering and reply parsing. Renderers turn OpenAI-shaped messages into token ids for Kimi K3
// ("XTML", spec 4.3), Qwen3 (ChatML), DeepSeek-V3, Kimi K2 and gpt-oss (harmony), each byte-identical
// to the model's released chat template; parsers split generated output back into reasoning,
// content and tool calls. Special tokens come only from the renderer's own structure: message
// text, names, tool arguments and results are always encoded as ordinary text (injection-proof).
//
// Messages are nlohmann::ordered_json (key order matters: Qwen3's template prints tool schemas and
// arguments in insertion order) in the OpenAI chat shape:
//   {"role": "system"|"user"|"assistant"|"tool", "content": string | null | [{"type":"text","text":...}],
//    "name"?, "reasoning_content"?, "tool_calls"?: [{"id"?, "type":"function", "function":
//    {"name", "arguments": object | JSON string}}], "tool_call_id"? (tool), "tool"? (K3 tool name)}
// gpt-oss's template calls the reasoning "thinking"; its renderer reads that or reasoning_content.
// Non-text content parts are refused with sluice::Error. Where a template only concatenates or
// only JSON-prints tool-call arguments, the renderer does the same with what it is given
// (adapt_tool_arguments() gives each format the form its template expects).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::tokenizer {

using ChatJson = nlohmann::ordered_json;

enum class ChatFormat {
  kimi_k3,           // <|open|> ... <|sep|> tags, <|end_of_msg|> after each message
  qwen3,             // <|im_start|>role\n ... <|im_end|>\n, <think> blocks, <tool_call> JSON (Qwen3-MoE too)
  deepseek_v3,       // DeepSeek-V3 as first released (Dec 2024 template): <｜User｜>, <｜Assistant｜>
  deepseek_v3_0324,  // DeepSeek-V3-0324's revision of it (each user turn ends in <｜Assistant｜>)
  kimi_k2,           // Kimi-K2-Instruct: <|im_user|>user<|im_middle|> ... <|im_end|>, tool-call sections
  kimi_k2_thinking,  // Kimi-K2-Thinking: the same with <think> blocks
  gpt_oss,           // harmony: <|start|>role<|channel|>..<|message|> ... <|end|>, reasoning effort
};

// The format's name as `--chat-format` and `sluice tokenize --format` take it ("kimi_k3", "qwen3",
// "deepseek_v3", "deepseek_v3_0324", "kimi_k2", "kimi_k2_thinking", "gpt_oss"), and back.
const char* chat_format_name(ChatFormat format);
std::optional<ChatFormat> chat_format_from_name(std::string_view name);

// From the tokenizer's special tokens: kimi_k3 (<|open|>/<|close|>/<|sep|>/<|end_of_msg|>), gpt_oss
// (<|start|>/<|channel|>/<|message|>/<|end|>/<|return|>/<|call|>), the DeepSeek-V3 family
// (<｜User｜>/<｜Assistant｜>/<｜tool▁calls▁begin｜>), Kimi K2 (<|im_user|>/<|im_assistant|>/<|im_middle|>/
// <|im_end|>), qwen3 (<|im_start|>/<|im_end|>/<think>/</think>); nullopt otherwise. Within a family
// the model's own chat template (`chat_template`, read_chat_template()) picks the revision: DeepSeek
// templates without `is_last_user` are the first V3 release (else V3-0324, also the default without
// a template); a Kimi K2 template that writes <think> is K2-Thinking (without a template: a
// tokenizer that has <think> is).
std::optional<ChatFormat> detect_chat_format(const Tokenizer& tokenizer, std::string_view chat_template = {});

// The chat template a model directory ships: chat_template.jinja, else tokenizer_config.json's
// "chat_template" (a string, or the "default" entry of a list of {name, template}); "" when none.
// Throws sluice::Error on a malformed tokenizer_config.json.
std::string read_chat_template(const std::string& model_dir);

struct ChatOptions {
  bool add_generation_prompt = true;
  // K3: think blocks and the "<|open|>think<|sep|>" generation prompt ("response" when off).
  // Qwen3: enable_thinking (off adds an empty <think></think> to the generation prompt).
  bool thinking = true;
  // Most ids the rendered prompt may have (an untrusted conversation against a context length):
  // encoding stops as soon as it has more, and RenderedChat::too_long is set.
  size_t max_ids = SIZE_MAX;
  // OpenAI "tools" array (or null). K3 prints it deep-sorted and compact in a tool-declare system
  // message; Qwen3 prints each entry with Python json.dumps spacing in insertion order; Kimi K2
  // prints the whole array so; gpt-oss writes a TypeScript-like namespace; DeepSeek-V3's templates
  // print no tools.
  ChatJson tools = nullptr;

  // --- Kimi K3 only ---
  // "low" | "high" | "max", or empty for "not given by the caller".
  std::string thinking_effort;
  // [uncertain] switch 1 (spec 4 cross-check d): when thinking is on and no effort is given, emit
  // the thinking-effort system message with effort "max" (deltafin: yes, attributing the default to
  // Moonshot's apply_chat_template; colibri: no).
  bool default_effort_message = true;
  // [uncertain] switch 2: with thinking on, give past assistant turns that carry no reasoning an
  // empty <think> block (deltafin: yes; colibri: no, think block only when there is reasoning).
  bool empty_think_in_history = true;
  // "required" / "none" add K3's tool-choice system message; anything else adds nothing.
  std::string tool_choice;
  // {"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": {...}}} add K3's
  // response-format system message.
  ChatJson response_format = nullptr;

  // --- gpt-oss (harmony) only: the template's keyword arguments ---
  // "Reasoning: ..." in the system message: "low" | "medium" | "high"; empty = the template's default
  // ("medium").
  std::string reasoning_effort;
  // "Current date: YYYY-MM-DD" (the template's strftime_now("%Y-%m-%d")); empty = today, local time.
  std::string current_date;
  // The first line of the system message; unset = "You are ChatGPT, a large language model trained
  // by OpenAI.".
  std::optional<std::string> model_identity;
  // "browser" and/or "python": the built-in tool descriptions of the system message.
  std::vector<std::string> builtin_tools;
};

// Whether the rendered prompt ends inside a reasoning block, so that a reply parser must start in
// reasoning (K3 with thinking on; every other format opens its reasoning in the reply itself).
bool prompt_opens_think(ChatFormat format, const ChatOptions& options);

// One piece of the rendered prompt. `special` pieces are exactly one special token.
struct ChatSegment {
  std::string text;
  bool special = false;
};

struct RenderedChat {
  std::vector<int32_t> ids;
  std::string text;                   // all segments concatenated (what a template engine prints)
  std::vector<ChatSegment> segments;  // K3: every structural piece is its own BPE segment
  // More than ChatOptions::max_ids ids: encoding stopped there and `ids` holds a prefix.
  bool too_long = false;
};

// Renders `messages` (a JSON array) for `format`. Throws sluice::Error on malformed messages or
// when the tokenizer lacks a special token the format needs.
RenderedChat render_chat(const Tokenizer& tokenizer, ChatFormat format, const ChatJson& messages,
                         const ChatOptions& options = {});

// A tool call recovered from generated output; `arguments` is JSON text (an object). `id` is the
// model's own call id where the format has one (Kimi K2: "functions.NAME:INDEX"), else empty.
struct ParsedToolCall {
  std::string name;
  std::string arguments;
  std::string id;
};

struct ParsedReply {
  std::string reasoning;  // reasoning_content
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  // The end-of-message marker was seen (K3 <|end_of_msg|>, Qwen3 and Kimi K2 <|im_end|>, DeepSeek
  // <｜end▁of▁sentence｜>, harmony <|return|> or <|call|>).
  bool complete = false;
};

// Splits generated ids in any format (the incremental parser below, run to the end).
ParsedReply parse_reply(const Tokenizer& tokenizer, ChatFormat format, std::span<const int32_t> ids,
                        bool prompt_opened_think = false);

// Splits generated ids (everything after the generation prompt) into reasoning, content and tool
// calls. `prompt_opened_think`: the prompt ended inside a think block (K3 with thinking on).
// Works on partial output too (what is there so far; markers are never leaked into text).
ParsedReply parse_k3_reply(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool prompt_opened_think = true);
// Same for Qwen3 text (decoded generated bytes). Output without "</think>" is content unless
// `prompt_opened_think`; <tool_call>{json}</tool_call> blocks become tool calls (invalid JSON stays
// in content).
ParsedReply parse_qwen3_reply(std::string_view text, bool prompt_opened_think = false);

// Incremental form of the parsers for streaming (the server's SSE deltas): feed ids as they are
// generated; each call returns the new reasoning/content text that is final (linear time overall).
// Text that could still turn out to be part of a marker (K3 tag names between <|close|> and <|sep|>,
// Qwen3 "</think>", "<tool_call>", "<|im_end|>"), newlines that a marker would strip, and incomplete
// UTF-8 sequences are withheld until decided; DeepSeek, Kimi K2 and harmony markers are single ids,
// and their headers and tool-call bodies never reach the text. Tool calls are reported by finish().
class ReplyStream {
 public:
  ReplyStream(const Tokenizer& tokenizer, ChatFormat format, bool prompt_opened_think);
  ~ReplyStream();
  ReplyStream(const ReplyStream&) = delete;
  ReplyStream& operator=(const ReplyStream&) = delete;
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta push(std::span<const int32_t> ids);
  // At the end of generation: the text still withheld, as a last delta.
  Delta flush();
  // Everything parsed (reasoning, content, tool calls, whether the end marker was seen).
  ParsedReply finish();

  struct Parser;  // format-specific incremental parser (chat_parse.cpp)

 private:
  Delta take(bool final);
  const Tokenizer& tokenizer_;
  std::unique_ptr<Parser> parser_;
  size_t sent_reasoning_ = 0, sent_content_ = 0;
};

// Tool-call arguments in the form `format`'s template expects: DeepSeek-V3 concatenates them (JSON
// text: objects are printed as Python json.dumps would), Kimi-K2-Instruct and gpt-oss JSON-print
// them (strings that hold a JSON value are parsed, so the model sees its own output again), the
// others take either. A copy of `messages`; messages it cannot adapt are left as they are.
ChatJson adapt_tool_arguments(ChatFormat format, const ChatJson& messages);

// Python json.dumps(value, ensure_ascii=False) with the given separators: keys in stored order,
// floats in shortest round-trip form. Used by the Qwen3 template (tojson) and K3 renders.
std::string python_json_dumps(const ChatJson& value, bool compact);

}  // namespace sluice::tokenizer
