// Qwen3 ChatML rendering: a line-by-line port of the behaviour of the chat template shipped with
// Qwen3's tokenizer_config.json (tools header, last-query tracking, <think> handling of assistant
// turns, <tool_call> JSON, grouped <tool_response>s, enable_thinking). Template literals may contain
// special tokens; message text, names and JSON are always ordinary text.
#include "core/error.h"
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

// Specials that appear in the template's own literals.
const std::vector<std::string_view> kTemplateSpecials = {"<|im_start|>", "<|im_end|>",  "<think>",         "</think>",
                                                         "<tool_call>",  "</tool_call>", "<tool_response>", "</tool_response>"};

std::string strip_chars(std::string s, bool left, bool right) {
  if (right) {
    size_t e = s.find_last_not_of('\n');
    s.erase(e == std::string::npos ? 0 : e + 1);
  }
  if (left) s.erase(0, std::min(s.find_first_not_of('\n'), s.size()));
  return s;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace

RenderedChat render_qwen3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& o) {
  TemplateWriter out(kTemplateSpecials);
  auto role = [&](size_t i) { return messages[i]["role"].get<std::string>(); };
  auto content = [&](size_t i) {
    return content_text(messages[i].value("content", ChatJson()), cat("chat: messages[", i, "]"));
  };
  size_t n = messages.size();
  if (truthy(o.tools)) {
    SLUICE_CHECK(o.tools.is_array(), "chat: tools must be an array");
    out.literal("<|im_start|>system\n");
    if (n > 0 && role(0) == "system") {
      out.text(content(0));
      out.literal("\n\n");
    }
    out.literal(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
        "function signatures within <tools></tools> XML tags:\n<tools>");
    for (const ChatJson& tool : o.tools) {
      out.literal("\n");
      out.text(python_json_dumps(tool, false));
    }
    out.literal(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n");
  } else if (n > 0 && role(0) == "system") {
    out.literal("<|im_start|>system\n");
    out.text(content(0));
    out.literal("<|im_end|>\n");
  }
  // The last user turn that is not a wrapped tool response.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    if (role(k) != "user") continue;
    std::string c = content(k);
    if (starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>")) continue;
    last_query = k;
    break;
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatJson& m = messages[i];
    std::string r = role(i), where = cat("chat: messages[", i, "]");
    if (r == "user" || (r == "system" && i != 0)) {
      out.literal("<|im_start|>");
      out.text(r + "\n" + content(i));
      out.literal("<|im_end|>\n");
    } else if (r == "assistant") {
      std::string text = content(i), reasoning;
      if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
        reasoning = python_str(m["reasoning_content"]);
      } else if (text.find("</think>") != std::string::npos) {
        std::string before = text.substr(0, text.find("</think>"));
        text = strip_chars(text.substr(text.rfind("</think>") + 8), true, false);
        before = strip_chars(before, false, true);
        size_t open = before.rfind("<think>");
        reasoning = strip_chars(open == std::string::npos ? before : before.substr(open + 7), true, false);
      }
      out.literal("<|im_start|>");
      if (i > last_query && (i + 1 == n || !reasoning.empty())) {
        out.text("assistant\n");
        out.literal("<think>\n");
        out.text(strip_chars(reasoning, true, true));
        out.literal("\n</think>\n\n");
        out.text(strip_chars(text, true, false));
      } else {
        out.text("assistant\n" + text);
      }
      if (m.contains("tool_calls") && truthy(m["tool_calls"])) {
        const ChatJson& calls = m["tool_calls"];
        SLUICE_CHECK(calls.is_array(), where, ".tool_calls must be an array");
        for (size_t k = 0; k < calls.size(); ++k) {
          if ((k == 0 && !text.empty()) || k > 0) out.literal("\n");
          const ChatJson& call = calls[k].contains("function") && truthy(calls[k]["function"]) ? calls[k]["function"]
                                                                                               : calls[k];
          SLUICE_CHECK(call.is_object() && call.contains("name"), where, ".tool_calls[", k, "]: lacks a name");
          out.literal("<tool_call>\n{\"name\": \"");
          out.text(python_str(call["name"]));
          out.literal("\", \"arguments\": ");
          const ChatJson args = call.value("arguments", ChatJson());
          out.text(args.is_string() ? args.get<std::string>() : python_json_dumps(args, false));
          out.literal("}\n</tool_call>");
        }
      }
      out.literal("<|im_end|>\n");
    } else if (r == "tool") {
      if (i == 0 || role(i - 1) != "tool") out.literal("<|im_start|>user");
      out.literal("\n<tool_response>\n");
      out.text(content(i));
      out.literal("\n</tool_response>");
      if (i + 1 == n || role(i + 1) != "tool") out.literal("<|im_end|>\n");
    }
  }
  if (o.add_generation_prompt) {
    out.literal("<|im_start|>assistant\n");
    if (!o.thinking) out.literal("<think>\n\n</think>\n\n");
  }
  return encode_segments(tok, std::move(out.segments), "Qwen3", o.max_ids);
}

}  // namespace sluice::tokenizer::chat_detail
