// Shared chat helpers (chat_internal.h), Python-style JSON printing, format names and detection, the
// model directory's chat template, tool-argument adaptation and the render_chat entry point.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "format/json_util.h"
#include "tokenizer/chat_internal.h"
#include "tokenizer/token_table.h"

namespace sluice::tokenizer {
namespace chat_detail {

bool truthy(const ChatJson& v) {
  switch (v.type()) {
    case ChatJson::value_t::null: return false;
    case ChatJson::value_t::boolean: return v.get<bool>();
    case ChatJson::value_t::number_integer: return v.get<int64_t>() != 0;
    case ChatJson::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case ChatJson::value_t::number_float: return v.get<double>() != 0.0;
    case ChatJson::value_t::string: return !v.get_ref<const std::string&>().empty();
    case ChatJson::value_t::array:
    case ChatJson::value_t::object: return !v.empty();
    default: return false;
  }
}

std::string python_str(const ChatJson& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return python_json_dumps(v, false);
}

ChatJson deep_sort(const ChatJson& v) {
  if (v.is_object()) {
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    ChatJson out = ChatJson::object();
    for (const std::string& k : keys) out[k] = deep_sort(v.at(k));
    return out;
  }
  if (v.is_array()) {
    ChatJson out = ChatJson::array();
    for (const auto& e : v) out.push_back(deep_sort(e));
    return out;
  }
  return v;
}

std::string content_text(const ChatJson& content, const std::string& where) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  SLUICE_CHECK(content.is_array(), where, ".content: expected a string, null or an array of text parts");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const ChatJson& part = content[i];
    SLUICE_CHECK(part.is_object(), where, ".content[", i, "]: expected an object");
    std::string type = part.value("type", std::string("text"));
    SLUICE_CHECK(type == "text", where, ".content[", i, "]: non-text content (type '", type, "') is not supported");
    SLUICE_CHECK(part.contains("text"), where, ".content[", i, "]: text part lacks 'text'");
    out += python_str(part["text"]);
  }
  return out;
}

int32_t require_special(const Tokenizer& tok, const std::string& spelling, const char* format) {
  auto id = tok.special_id(spelling);
  SLUICE_CHECK(id.has_value(), format, " chat: the tokenizer (", tok.describe(), ") has no special token ", spelling);
  return *id;
}

void TemplateWriter::literal(std::string_view s) {
  while (!s.empty()) {
    size_t best = std::string_view::npos, best_len = 0;
    for (std::string_view sp : specials_) {
      // The earliest special; at one position the longest spelling.
      size_t p = s.find(sp);
      if (p == std::string_view::npos) continue;
      if (p < best || (p == best && sp.size() > best_len)) best = p, best_len = sp.size();
    }
    if (best == std::string_view::npos) {
      text(s);
      return;
    }
    text(s.substr(0, best));
    segments.push_back(ChatSegment{std::string(s.substr(best, best_len)), true});
    s.remove_prefix(best + best_len);
  }
}

void TemplateWriter::text(std::string_view s) {
  if (s.empty()) return;
  if (!segments.empty() && !segments.back().special) segments.back().text += s;
  else segments.push_back(ChatSegment{std::string(s), false});
}

std::string field_text(const ChatJson& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : python_str(*it);
}

const ChatJson& call_function(const ChatJson& call) {
  return call.is_object() && call.contains("function") && call["function"].is_object() ? call["function"] : call;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

RenderedChat encode_segments(const Tokenizer& tok, std::vector<ChatSegment> segments, const char* format,
                             size_t max_ids) {
  RenderedChat out;
  for (const ChatSegment& s : segments) {
    out.text += s.text;
    if (s.special) {
      out.ids.push_back(require_special(tok, s.text, format));
      out.too_long = out.ids.size() > max_ids;
    } else {
      out.too_long = !tok.encode_into_at_most(s.text, out.ids, max_ids - std::min(max_ids, out.ids.size()));
    }
    if (out.too_long) break;
  }
  out.segments = std::move(segments);
  return out;
}

}  // namespace chat_detail

namespace {

void dump_python(const ChatJson& v, bool compact, std::string& out) {
  switch (v.type()) {
    case ChatJson::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += compact ? "," : ", ";
        first = false;
        out += ChatJson(it.key()).dump(-1, ' ', false, ChatJson::error_handler_t::replace);
        out += compact ? ":" : ": ";
        dump_python(it.value(), compact, out);
      }
      out += '}';
      return;
    }
    case ChatJson::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += compact ? "," : ", ";
        dump_python(v[i], compact, out);
      }
      out += ']';
      return;
    }
    case ChatJson::value_t::number_float: {
      double d = v.get<double>();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += v.dump();
      return;
    }
    default:
      // Strings: nlohmann escapes exactly like json.dumps(ensure_ascii=False) (\" \\ \b \f \n \r \t,
      // other controls as lower-case \u00XX, everything else raw).
      out += v.dump(-1, ' ', false, ChatJson::error_handler_t::replace);
  }
}

}  // namespace

std::string python_json_dumps(const ChatJson& value, bool compact) {
  std::string out;
  dump_python(value, compact, out);
  return out;
}

namespace {

struct FormatName {
  ChatFormat format;
  const char* name;
};
constexpr FormatName kFormatNames[] = {
    {ChatFormat::kimi_k3, "kimi_k3"},         {ChatFormat::qwen3, "qwen3"},
    {ChatFormat::deepseek_v3, "deepseek_v3"}, {ChatFormat::deepseek_v3_0324, "deepseek_v3_0324"},
    {ChatFormat::kimi_k2, "kimi_k2"},         {ChatFormat::kimi_k2_thinking, "kimi_k2_thinking"},
    {ChatFormat::gpt_oss, "gpt_oss"},
};

// Python json.dumps of an object's values, for DeepSeek's concatenated arguments.
void adapt_arguments(ChatJson& fn, ChatFormat format) {
  auto it = fn.find("arguments");
  if (it == fn.end()) return;
  if (format == ChatFormat::deepseek_v3 || format == ChatFormat::deepseek_v3_0324) {
    if (!it->is_string() && !it->is_null()) *it = python_json_dumps(*it, false);
  } else if (format == ChatFormat::kimi_k2 || format == ChatFormat::gpt_oss) {
    if (!it->is_string()) return;
    ChatJson parsed = format::parse_json_or_discarded<ChatJson>(it->get_ref<const std::string&>());
    if (!parsed.is_discarded()) *it = std::move(parsed);
  }
}

}  // namespace

const char* chat_format_name(ChatFormat format) {
  for (const FormatName& f : kFormatNames)
    if (f.format == format) return f.name;
  return "unknown";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  for (const FormatName& f : kFormatNames)
    if (name == f.name) return f.format;
  return std::nullopt;
}

std::optional<ChatFormat> detect_chat_format(const Tokenizer& tok, std::string_view chat_template) {
  auto has = [&](const char* s) { return tok.special_id(s).has_value(); };
  if (has("<|open|>") && has("<|close|>") && has("<|sep|>") && has("<|end_of_msg|>")) return ChatFormat::kimi_k3;
  if (has("<|start|>") && has("<|channel|>") && has("<|message|>") && has("<|end|>") && has("<|return|>") &&
      has("<|call|>"))
    return ChatFormat::gpt_oss;
  if (has("<｜User｜>") && has("<｜Assistant｜>") && has("<｜end▁of▁sentence｜>") && has("<｜tool▁calls▁begin｜>")) {
    bool first_release = !chat_template.empty() && chat_template.find("is_last_user") == std::string_view::npos;
    return first_release ? ChatFormat::deepseek_v3 : ChatFormat::deepseek_v3_0324;
  }
  if (has("<|im_user|>") && has("<|im_assistant|>") && has("<|im_system|>") && has("<|im_middle|>") &&
      has("<|im_end|>")) {
    bool thinking = chat_template.empty() ? has("<think>") : chat_template.find("<think>") != std::string_view::npos;
    return thinking ? ChatFormat::kimi_k2_thinking : ChatFormat::kimi_k2;
  }
  if (has("<|im_start|>") && has("<|im_end|>") && has("<think>") && has("</think>")) return ChatFormat::qwen3;
  return std::nullopt;
}

std::string read_chat_template(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir(model_dir);
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) return read_whole_file((dir / "chat_template.jinja").string());
  fs::path config = dir / "tokenizer_config.json";
  if (!fs::is_regular_file(config, ec)) return "";
  bool too_deep = false;
  ChatJson root = format::parse_json_or_discarded<ChatJson>(read_whole_file(config.string()), &too_deep);
  SLUICE_CHECK(!too_deep && !root.is_discarded() && root.is_object(), config.string(), ": not a JSON object");
  auto it = root.find("chat_template");
  if (it == root.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  SLUICE_CHECK(it->is_array(), config.string(), ": chat_template must be a string or a list of {name, template}");
  for (const ChatJson& e : *it)
    if (e.is_object() && e.value("name", std::string()) == "default" && e.contains("template") && e["template"].is_string())
      return e["template"].get<std::string>();
  return "";
}

bool prompt_opens_think(ChatFormat format, const ChatOptions& options) {
  return format == ChatFormat::kimi_k3 && options.thinking && options.add_generation_prompt;
}

ChatJson adapt_tool_arguments(ChatFormat format, const ChatJson& messages) {
  ChatJson out = messages;
  if (!out.is_array()) return out;
  for (ChatJson& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (ChatJson& call : m["tool_calls"]) {
      if (!call.is_object()) continue;
      if (call.contains("function") && call["function"].is_object()) adapt_arguments(call["function"], format);
      else adapt_arguments(call, format);
    }
  }
  return out;
}

RenderedChat render_chat(const Tokenizer& tok, ChatFormat format, const ChatJson& messages,
                         const ChatOptions& options) {
  SLUICE_CHECK(messages.is_array(), "chat: messages must be a JSON array");
  for (size_t i = 0; i < messages.size(); ++i) {
    SLUICE_CHECK(messages[i].is_object(), "chat: messages[", i, "] must be an object");
    SLUICE_CHECK(messages[i].contains("role") && messages[i]["role"].is_string(), "chat: messages[", i,
                 "].role must be a string");
  }
  try {
    switch (format) {
      case ChatFormat::kimi_k3: return chat_detail::render_k3(tok, messages, options);
      case ChatFormat::qwen3: return chat_detail::render_qwen3(tok, messages, options);
      case ChatFormat::deepseek_v3: return chat_detail::render_deepseek_v3(tok, messages, options, false);
      case ChatFormat::deepseek_v3_0324: return chat_detail::render_deepseek_v3(tok, messages, options, true);
      case ChatFormat::kimi_k2: return chat_detail::render_kimi_k2(tok, messages, options, false);
      case ChatFormat::kimi_k2_thinking: return chat_detail::render_kimi_k2(tok, messages, options, true);
      case ChatFormat::gpt_oss: return chat_detail::render_harmony(tok, messages, options);
    }
    fail("chat: unknown chat format");
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected JSON type somewhere in the messages or options.
    fail("chat: malformed messages or options: ", e.what());
  }
}

}  // namespace sluice::tokenizer
