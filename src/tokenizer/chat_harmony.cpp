// gpt-oss chat rendering (OpenAI's harmony format): a port of the chat template shipped with
// openai/gpt-oss-20b and -120b (tests/fixtures/tokenizer/templates/). A system message with the
// model identity, knowledge cutoff, current date, reasoning effort and valid channels; a developer
// message with the instructions (a first system/developer message) and the tools; then
// <|start|>role<|channel|>channel<|message|>text<|end|> messages. Reasoning of past turns is
// dropped, except the analysis before a tool call that no later final answer replaces; the first
// tool call of a turn is written to=functions.NAME on the commentary channel and its result comes
// back from functions.NAME as a JSON string.
#include <ctime>

#include "core/error.h"
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

const std::vector<std::string_view> kSpecials = {"<|start|>", "<|message|>", "<|end|>",
                                                 "<|channel|>", "<|call|>",  "<|return|>"};

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &local);
  return buf;
}

// The template's "thinking" field; reasoning_content (the OpenAI API's name) when it is absent.
const ChatJson* thinking_of(const ChatJson& m) {
  for (const char* key : {"thinking", "reasoning_content"}) {
    auto it = m.find(key);
    if (it != m.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

void check_no_channel_tags(const std::string& text, const char* field, const std::string& where) {
  SLUICE_CHECK(text.find("<|channel|>analysis<|message|>") == std::string::npos &&
                   text.find("<|channel|>final<|message|>") == std::string::npos,
               where, ".", field,
               ": gpt-oss messages must not contain <|channel|> tags; give the analysis as reasoning_content and the "
               "final answer as content");
}

void system_message(TemplateWriter& w, const ChatOptions& o) {
  w.literal("<|start|>system<|message|>");
  w.text(o.model_identity.value_or("You are ChatGPT, a large language model trained by OpenAI.") + "\n");
  w.text("Knowledge cutoff: 2024-06\n");
  w.text("Current date: " + (o.current_date.empty() ? today() : o.current_date) + "\n\n");
  w.text("Reasoning: " + (o.reasoning_effort.empty() ? std::string("medium") : o.reasoning_effort) + "\n\n");
  if (!o.builtin_tools.empty()) {
    bool browser = false, python = false;
    for (const std::string& t : o.builtin_tools) {
      SLUICE_CHECK(t == "browser" || t == "python", "chat: unknown gpt-oss built-in tool '", t,
                   "' (supported: browser, python)");
      browser = browser || t == "browser";
      python = python || t == "python";
    }
    w.text("# Tools\n\n" + harmony_builtin_tools(browser, python));
  }
  w.text("# Valid channels: analysis, commentary, final. Channel must be included for every message.");
  if (truthy(o.tools)) w.text("\nCalls to these tools must go to the commentary channel: 'functions'.");
  w.literal("<|end|>");
}

void analysis(TemplateWriter& w, const std::string& text) {
  w.literal("<|start|>assistant<|channel|>analysis<|message|>");
  w.text(text);
  w.literal("<|end|>");
}

}  // namespace

RenderedChat render_harmony(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& o) {
  if (!o.reasoning_effort.empty())
    SLUICE_CHECK(o.reasoning_effort == "low" || o.reasoning_effort == "medium" || o.reasoning_effort == "high",
                 "chat: unsupported gpt-oss reasoning effort '", o.reasoning_effort, "' (supported: low, medium, high)");
  if (truthy(o.tools)) SLUICE_CHECK(o.tools.is_array(), "chat: tools must be an array");
  TemplateWriter w(kSpecials);
  system_message(w, o);

  auto role = [&](size_t i) { return messages[i]["role"].get<std::string>(); };
  size_t first = 0;
  std::string developer;
  if (!messages.empty() && (role(0) == "developer" || role(0) == "system")) {
    developer = content_text(messages[0].value("content", ChatJson()), "chat: messages[0]");
    first = 1;
  }
  if (!developer.empty() || truthy(o.tools)) {
    w.literal("<|start|>developer<|message|>");
    if (!developer.empty()) w.text("# Instructions\n\n" + developer + "\n\n");
    if (truthy(o.tools)) w.text("# Tools\n\n" + harmony_tool_namespace(o.tools));
    w.literal("<|end|>");
  }

  std::optional<std::string> last_tool_call;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatJson& m = messages[i];
    const std::string r = role(i), where = cat("chat: messages[", i, "]");
    const ChatJson content_json = m.value("content", ChatJson());
    if (r == "assistant") {
      const std::string content = content_text(content_json, where);
      const ChatJson* thinking_json = thinking_of(m);
      const std::string thinking = thinking_json ? python_str(*thinking_json) : std::string();
      check_no_channel_tags(content, "content", where);
      check_no_channel_tags(thinking, "reasoning_content", where);
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        // The analysis before a tool call stays unless a later assistant turn gives a final answer.
        bool final_later = false;
        for (size_t k = i + 1; k < messages.size(); ++k)
          final_later = final_later || (role(k) == "assistant" && !messages[k].contains("tool_calls"));
        const ChatJson& calls = m["tool_calls"];
        SLUICE_CHECK(calls.is_array() && !calls.empty() && calls[0].is_object(), where,
                     ".tool_calls: gpt-oss needs at least one tool call object");
        // The template writes only a turn's first call (gpt-oss makes one call per turn).
        const ChatJson& fn = truthy(calls[0].value("function", ChatJson())) ? calls[0]["function"] : calls[0];
        SLUICE_CHECK(fn.contains("name"), where, ".tool_calls[0]: lacks a name");
        SLUICE_CHECK(content.empty() || thinking.empty(), where,
                     ": gpt-oss cannot take both content and reasoning_content in an assistant turn with tool calls");
        if (!final_later && !content.empty()) analysis(w, content);
        else if (!final_later && !thinking.empty()) analysis(w, thinking);
        const std::string name = python_str(fn["name"]);
        w.literal("<|start|>assistant");
        w.text(" to=functions." + name);
        w.literal("<|channel|>");
        w.text("commentary " + (fn.contains("content_type") ? python_str(fn["content_type"]) : std::string("json")));
        w.literal("<|message|>");
        w.text(python_json_dumps(fn.value("arguments", ChatJson()), false));
        w.literal("<|call|>");
        last_tool_call = name;
      } else if (i + 1 == messages.size() && !o.add_generation_prompt) {
        if (thinking_json) analysis(w, thinking);
        w.literal("<|start|>assistant<|channel|>final<|message|>");
        w.text(content);
        w.literal("<|return|>");
      } else {
        w.literal("<|start|>assistant<|channel|>final<|message|>");
        w.text(content);
        w.literal("<|end|>");
        last_tool_call.reset();
      }
    } else if (r == "tool") {
      SLUICE_CHECK(last_tool_call.has_value(), where,
                   ": a tool message must follow an assistant message with a tool call (gpt-oss)");
      w.literal("<|start|>");
      w.text("functions." + *last_tool_call + " to=assistant");
      w.literal("<|channel|>");
      w.text("commentary");
      w.literal("<|message|>");
      w.text(python_json_dumps(content_json, false));
      w.literal("<|end|>");
    } else if (r == "user") {
      w.literal("<|start|>user<|message|>");
      w.text(content_text(content_json, where));
      w.literal("<|end|>");
    }
  }
  if (o.add_generation_prompt) w.literal("<|start|>assistant");
  return encode_segments(tok, std::move(w.segments), "gpt-oss", o.max_ids);
}

}  // namespace sluice::tokenizer::chat_detail
