// Kimi K3 "XTML" chat rendering (spec 4.3): tags <|open|>name key="value"<|sep|> ... <|close|>name<|sep|>,
// <|end_of_msg|> after each message; every structural piece and each text is its own BPE segment.
// Conversation normalisation (tool-call arguments, tool-result reordering) happens first.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "format/json_util.h"
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

const char* const kOpen = "<|open|>";
const char* const kClose = "<|close|>";
const char* const kSep = "<|sep|>";
const char* const kEnd = "<|end_of_msg|>";

class Xtml {
 public:
  std::vector<ChatSegment> segments;

  void special(const char* s) { segments.push_back(ChatSegment{s, true}); }
  void text(const std::string& s) {
    if (!s.empty()) segments.push_back(ChatSegment{s, false});
  }
  void open(const std::string& tag, const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
    special(kOpen);
    text(tag);
    for (const auto& [key, value] : attrs) {
      text(" " + key);
      text("=\"");
      text(escape(value));
      text("\"");
    }
    special(kSep);
  }
  void close(const std::string& tag) {
    special(kClose);
    text(tag);
    special(kSep);
  }
  void end() { special(kEnd); }
  void system(const std::string& type, const std::string& body) {
    open("message", {{"role", "system"}, {"type", type}});
    text(body);
    close("message");
    end();
  }

 private:
  static std::string escape(const std::string& v) {
    std::string out;
    for (char c : v) {
      if (c == '&') out += "&amp;";
      else if (c == '"') out += "&quot;";
      else out += c;
    }
    return out;
  }
};

std::string role_of(const ChatJson& m) { return m.value("role", std::string()); }

// The object holding name/arguments: call["function"] when present, else the call itself.
const ChatJson& function_of(const ChatJson& call) {
  return call.contains("function") && call["function"].is_object() ? call["function"] : call;
}

// Arguments become an object; a string that is not JSON is kept raw for a <json> block.
void normalize_arguments(ChatJson& fn, const std::string& where) {
  ChatJson args = fn.value("arguments", ChatJson());
  fn.erase("_xtml_json_block");
  if (args.is_null()) {
    fn["arguments"] = ChatJson::object();
  } else if (args.is_object()) {
  } else if (args.is_string()) {
    const std::string& raw = args.get_ref<const std::string&>();
    if (raw.find_first_not_of(" \t\r\n") == std::string::npos) {
      fn["arguments"] = ChatJson::object();
      return;
    }
    ChatJson parsed = format::parse_json_or_discarded<ChatJson>(raw);
    if (parsed.is_discarded()) {
      fn["arguments"] = ChatJson::object();
      fn["_xtml_json_block"] = raw;
    } else {
      SLUICE_CHECK(parsed.is_object(), where, ".arguments: Kimi K3 tool call arguments must be a JSON object");
      fn["arguments"] = parsed;
    }
  } else {
    fail(where, ".arguments: Kimi K3 tool call arguments must be an object or a JSON object string");
  }
}

ChatJson normalize_conversation(const ChatJson& messages) {
  ChatJson norm = ChatJson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatJson m = messages[i];
    if (m.contains("tools")) m["tools"] = deep_sort(m["tools"]);
    if (m.contains("tool_calls") && truthy(m["tool_calls"])) {
      SLUICE_CHECK(m["tool_calls"].is_array(), "chat: messages[", i, "].tool_calls must be an array");
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        ChatJson& call = m["tool_calls"][k];
        if (!call.is_object()) continue;
        std::string where = cat("chat: messages[", i, "].tool_calls[", k, "]");
        if (call.contains("function") && call["function"].is_object()) normalize_arguments(call["function"], where);
        else normalize_arguments(call, where);
      }
    }
    norm.push_back(std::move(m));
  }
  // Tool results are reordered to the assistant's tool_call order when every id in the run resolves.
  ChatJson out = ChatJson::array();
  std::map<std::string, std::pair<size_t, std::optional<std::string>>> index;
  for (size_t cur = 0; cur < norm.size();) {
    const ChatJson& m = norm[cur];
    if (role_of(m) == "assistant") {
      index.clear();
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        const ChatJson& calls = m["tool_calls"];
        for (size_t k = 0; k < calls.size(); ++k) {
          if (!calls[k].is_object() || !calls[k].contains("id") || calls[k]["id"].is_null()) continue;
          std::string id = python_str(calls[k]["id"]);
          if (index.count(id)) continue;
          const ChatJson& fn = function_of(calls[k]);
          std::optional<std::string> name;
          if (fn.contains("name") && !fn["name"].is_null()) name = python_str(fn["name"]);
          index.emplace(id, std::make_pair(k + 1, name));
        }
      }
      out.push_back(m);
      ++cur;
      continue;
    }
    if (role_of(m) != "tool") {
      out.push_back(m);
      ++cur;
      continue;
    }
    struct Item {
      size_t order;
      size_t offset;
      std::optional<std::string> name;
      ChatJson message;
    };
    std::vector<Item> run;
    bool unresolved = false;
    for (size_t offset = 0; cur < norm.size() && role_of(norm[cur]) == "tool"; ++cur, ++offset) {
      const ChatJson& t = norm[cur];
      ChatJson id = t.contains("tool_call_id") ? t["tool_call_id"] : t.value("id", ChatJson());
      auto f = id.is_null() ? index.end() : index.find(python_str(id));
      if (f == index.end()) {
        unresolved = true;
        run.push_back(Item{SIZE_MAX, offset, std::nullopt, t});
      } else {
        run.push_back(Item{f->second.first, offset, f->second.second, t});
      }
    }
    if (!unresolved) {
      std::stable_sort(run.begin(), run.end(), [](const Item& a, const Item& b) {
        return a.order != b.order ? a.order < b.order : a.offset < b.offset;
      });
      for (Item& it : run)
        if (it.name) {
          it.message["tool"] = *it.name;
          if (it.message.contains("name")) it.message["name"] = *it.name;
        }
    }
    for (Item& it : run) out.push_back(std::move(it.message));
  }
  return out;
}

void tool_declare(Xtml& x, const ChatJson& tools, bool dynamic) {
  std::string json = python_json_dumps(deep_sort(tools), true);
  std::string body = dynamic ? "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
                               "You have access to all existing and extended tools.\n"
                               "Here are the specs for the extended tools.\n\n```json\n" + json + "\n```"
                             : "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + json +
                                   "\n```";
  x.system("tool-declare", body);
}

const char* xtml_type(const ChatJson& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_object()) return "object";
  return "array";
}

void assistant_body(Xtml& x, const ChatJson& m, const ChatOptions& o, const std::string& where) {
  if (o.thinking) {
    // Python's `reasoning_content or reasoning`: the first truthy of the two.
    ChatJson reasoning;
    if (m.contains("reasoning_content") && truthy(m["reasoning_content"])) reasoning = m["reasoning_content"];
    else if (m.contains("reasoning") && truthy(m["reasoning"])) reasoning = m["reasoning"];
    std::string text = reasoning.is_null() ? std::string() : python_str(reasoning);
    bool blank = text.find_first_not_of(" \t\r\n\v\f") == std::string::npos;
    if (!blank || o.empty_think_in_history) {
      x.open("think");
      if (!blank) x.text(text);
      x.close("think");
    }
  }
  x.open("response");
  x.text(content_text(m.value("content", ChatJson()), where));
  x.close("response");
  if (!m.contains("tool_calls") || !truthy(m["tool_calls"])) return;
  const ChatJson& calls = m["tool_calls"];
  x.open("tools");
  for (size_t k = 0; k < calls.size(); ++k) {
    SLUICE_CHECK(calls[k].is_object(), where, ".tool_calls[", k, "]: must be an object");
    const ChatJson& fn = function_of(calls[k]);
    SLUICE_CHECK(fn.contains("name") && fn["name"].is_string(), where, ".tool_calls[", k, "]: lacks a string name");
    x.open("call", {{"tool", fn["name"].get<std::string>()}, {"index", std::to_string(k + 1)}});
    if (fn.contains("_xtml_json_block")) {
      x.open("json", {{"type", "object"}});
      x.text(python_str(fn["_xtml_json_block"]));
      x.close("json");
    } else if (fn.contains("arguments") && fn["arguments"].is_object()) {
      for (auto it = fn["arguments"].begin(); it != fn["arguments"].end(); ++it) {
        x.open("argument", {{"key", it.key()}, {"type", xtml_type(it.value())}});
        x.text(it.value().is_string() ? it.value().get<std::string>() : python_json_dumps(it.value(), false));
        x.close("argument");
      }
    }
    x.close("call");
  }
  x.close("tools");
}

}  // namespace

RenderedChat render_k3(const Tokenizer& tok, const ChatJson& raw_messages, const ChatOptions& o) {
  ChatJson messages = normalize_conversation(raw_messages);
  Xtml x;
  if (truthy(o.tools)) tool_declare(x, o.tools, false);
  std::string effort = o.thinking_effort;
  if (effort.empty() && o.default_effort_message) effort = "max";
  if (o.thinking && !effort.empty()) {
    SLUICE_CHECK(effort == "low" || effort == "high" || effort == "max", "chat: unsupported thinking_effort '", effort,
                 "' (supported: low, high, max)");
    x.system("thinking-effort",
             "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
             "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked "
             "with `thinking_effort=" + effort + "`.");
  }
  std::optional<ChatJson> previous_calls;
  size_t tool_index = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatJson& m = messages[i];
    std::string role = role_of(m), where = cat("chat: messages[", i, "]");
    auto named = [&](const char* r) {
      std::vector<std::pair<std::string, std::string>> attrs{{"role", r}};
      if (m.contains("name") && truthy(m["name"])) attrs.emplace_back("name", python_str(m["name"]));
      return attrs;
    };
    if (role == "user" || (role == "system" && !(m.contains("tools") && truthy(m["tools"])))) {
      x.open("message", named(role == "user" ? "user" : "system"));
      x.text(content_text(m.value("content", ChatJson()), where));
      x.close("message");
      x.end();
    } else if (role == "system") {
      tool_declare(x, m["tools"], true);
    } else if (role == "tool") {
      ++tool_index;
      ChatJson name_value = m.contains("tool") ? m["tool"] : m.value("name", ChatJson());
      std::string name;
      if (name_value.is_string()) {
        name = name_value.get<std::string>();
      } else if (previous_calls && tool_index <= previous_calls->size()) {
        const ChatJson& fn = function_of((*previous_calls)[tool_index - 1]);
        if (fn.contains("name") && fn["name"].is_string()) name = fn["name"].get<std::string>();
      }
      SLUICE_CHECK(!name.empty() || name_value.is_string(), where,
                   ": Kimi K3 tool messages need a tool name: give tool/name, or follow an assistant tool_call");
      x.open("message", {{"role", "tool"}, {"tool", name}, {"index", std::to_string(tool_index)}});
      x.text(content_text(m.value("content", ChatJson()), where));
      x.close("message");
      x.end();
    } else if (role == "assistant") {
      previous_calls.reset();
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) previous_calls = m["tool_calls"];
      tool_index = 0;
      x.open("message", named("assistant"));
      assistant_body(x, m, o, where);
      x.close("message");
      x.end();
    }
  }
  if (o.tool_choice == "required")
    x.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
  else if (o.tool_choice == "none")
    x.system("tool-choice",
             "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.");
  std::string format_type;
  if (o.response_format.is_string()) format_type = o.response_format.get<std::string>();
  else if (o.response_format.is_object() && o.response_format.contains("type") && o.response_format["type"].is_string())
    format_type = o.response_format["type"].get<std::string>();
  const char* raw_json = "The system is invoked with `response_format=";
  if (format_type == "json_object") {
    x.system("response-format", std::string(raw_json) +
                                    "json_object`.\nYour response must be raw JSON data without markdown code blocks "
                                    "(```json) or any additional formatting.");
  } else if (format_type == "json_schema") {
    ChatJson schema;
    if (o.response_format.is_object() && o.response_format.contains("json_schema")) {
      const ChatJson& js = o.response_format["json_schema"];
      schema = js.is_object() ? (js.contains("schema") ? js["schema"] : js.contains("json_schema") ? js["json_schema"] : js)
                              : js;
    }
    x.system("response-format", std::string(raw_json) +
                                    "json_schema`.\nYour response must be raw JSON data without markdown code blocks "
                                    "(```json) or any additional formatting.\nThe JSON data must match the following "
                                    "schema:\n```json\n" + python_json_dumps(deep_sort(schema), true) + "\n```");
  }
  if (o.add_generation_prompt) {
    x.open("message", {{"role", "assistant"}});
    x.open(o.thinking ? "think" : "response");
  }
  return encode_segments(tok, std::move(x.segments), "Kimi K3", o.max_ids);
}

}  // namespace sluice::tokenizer::chat_detail
