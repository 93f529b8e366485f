// Kimi K2 chat rendering: ports of Kimi-K2-Instruct's and Kimi-K2-Thinking's chat templates
// (tests/fixtures/tokenizer/templates/). A message is <|im_user|>/<|im_assistant|>/<|im_system|>
// role <|im_middle|> body <|im_end|>; tools are declared as JSON in a tool_declare system message;
// tool calls are <|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|> inside a
// <|tool_calls_section_begin|>...<|tool_calls_section_end|> section, with ids "functions.NAME:INDEX";
// tool results are "## Return of ID" system messages. K2-Thinking writes <think>reasoning</think>
// before each assistant body: empty for the turns up to the last assistant turn without tool calls,
// the kept reasoning_content after it. Instruct's template is kept as released, including the
// literal backslash-n it writes after "## Return of ID".
#include "core/error.h"
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

const std::vector<std::string_view> kSpecials = {
    "<|im_system|>",         "<|im_user|>",          "<|im_assistant|>",    "<|im_middle|>",
    "<|im_end|>",            "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<think>",           "</think>"};

std::string role_of(const ChatJson& m) { return m["role"].get<std::string>(); }

bool has_calls(const ChatJson& m) { return m.contains("tool_calls") && truthy(m["tool_calls"]); }

// The tool-call arguments: K2-Thinking prints a string as it is and JSON-prints anything else;
// K2-Instruct JSON-prints whatever it gets (a string becomes a quoted JSON string).
std::string arguments_text(const ChatJson& fn, bool print_strings_raw) {
  ChatJson args = fn.value("arguments", ChatJson());
  if (print_strings_raw && args.is_string()) return args.get<std::string>();
  return python_json_dumps(args, false);
}

void write_tools_section(TemplateWriter& w, const ChatJson& calls, bool thinking_template, const std::string& where) {
  SLUICE_CHECK(calls.is_array(), where, ".tool_calls must be an array");
  w.literal("<|tool_calls_section_begin|>");
  for (size_t k = 0; k < calls.size(); ++k) {
    const ChatJson& call = calls[k];
    SLUICE_CHECK(call.is_object(), where, ".tool_calls[", k, "]: must be an object");
    const ChatJson& fn = call_function(call);
    w.literal("<|tool_call_begin|>");
    if (thinking_template) {
      w.text(field_text(call, "id"));
    } else {
      SLUICE_CHECK(fn.contains("name"), where, ".tool_calls[", k, "]: lacks a name");
      w.text("functions." + python_str(fn["name"]) + ":" + std::to_string(k));
    }
    w.literal("<|tool_call_argument_begin|>");
    w.text(arguments_text(fn, thinking_template));
    w.literal("<|tool_call_end|>");
  }
  w.literal("<|tool_calls_section_end|>");
}

void render_instruct(TemplateWriter& w, const ChatJson& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatJson& m = messages[i];
    const std::string r = role_of(m), where = cat("chat: messages[", i, "]");
    if (i == 0 && r != "system") w.literal("<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>");
    if (r == "system") w.literal("<|im_system|>system<|im_middle|>");
    else if (r == "user") w.literal("<|im_user|>user<|im_middle|>");
    else if (r == "assistant") w.literal("<|im_assistant|>assistant<|im_middle|>");
    else if (r == "tool") w.literal("<|im_system|>tool<|im_middle|>");
    const ChatJson content = m.value("content", ChatJson());
    if (r == "assistant" && has_calls(m)) {
      if (truthy(content)) w.text(content_text(content, where));
      write_tools_section(w, m["tool_calls"], false, where);
    } else if (r == "tool") {
      w.text("## Return of " + field_text(m, "tool_call_id") + "\\n" +
             (content.is_string() || content.is_null() ? python_str(content) : content_text(content, where)));
    } else if (!content.is_null()) {
      w.text(content_text(content, where));
    }
    w.literal("<|im_end|>");
  }
}

void render_thinking(TemplateWriter& w, const ChatJson& messages) {
  // Reasoning is kept only after the last assistant turn without tool calls (the turn in progress).
  size_t kept_from = 0;
  for (size_t k = messages.size(); k-- > 0;)
    if (role_of(messages[k]) == "assistant" && !has_calls(messages[k])) {
      kept_from = k + 1;
      break;
    }
  if (messages.empty() || role_of(messages[0]) != "system")
    w.literal("<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatJson& m = messages[i];
    const std::string r = role_of(m), where = cat("chat: messages[", i, "]");
    const std::string name = m.contains("name") && truthy(m["name"]) ? python_str(m["name"]) : r;
    w.literal(r == "user" ? "<|im_user|>" : r == "assistant" ? "<|im_assistant|>" : "<|im_system|>");
    w.text(name);
    w.literal("<|im_middle|>");
    const ChatJson content = m.value("content", ChatJson());
    if (r == "assistant") {
      w.literal("<think>");
      if (i >= kept_from) w.text(field_text(m, "reasoning_content"));
      w.literal("</think>");
      w.text(content_text(content, where));
      if (has_calls(m)) write_tools_section(w, m["tool_calls"], true, where);
    } else if (r == "tool") {
      w.text("## Return of " + field_text(m, "tool_call_id") + "\n");
      w.text(content_text(content, where));
    } else {
      w.text(content_text(content, where));
    }
    w.literal("<|im_end|>");
  }
}

}  // namespace

RenderedChat render_kimi_k2(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& o,
                            bool thinking_template) {
  TemplateWriter w(kSpecials);
  if (truthy(o.tools)) {
    w.literal("<|im_system|>tool_declare<|im_middle|>");
    w.text(python_json_dumps(o.tools, false));
    w.literal("<|im_end|>");
  }
  if (thinking_template) render_thinking(w, messages);
  else render_instruct(w, messages);
  if (o.add_generation_prompt) w.literal("<|im_assistant|>assistant<|im_middle|>");
  return encode_segments(tok, std::move(w.segments), thinking_template ? "Kimi-K2-Thinking" : "Kimi-K2", o.max_ids);
}

}  // namespace sluice::tokenizer::chat_detail
