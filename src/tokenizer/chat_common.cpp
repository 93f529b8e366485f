// Shared chat helpers (chat_internal.h), Python-style JSON printing, format detection and the
// render_chat entry point.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tokenizer/chat_internal.h"

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

std::optional<ChatFormat> detect_chat_format(const Tokenizer& tok) {
  auto has = [&](const char* s) { return tok.special_id(s).has_value(); };
  if (has("<|open|>") && has("<|close|>") && has("<|sep|>") && has("<|end_of_msg|>")) return ChatFormat::kimi_k3;
  if (has("<|im_start|>") && has("<|im_end|>") && has("<think>") && has("</think>")) return ChatFormat::qwen3;
  return std::nullopt;
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
    return format == ChatFormat::kimi_k3 ? chat_detail::render_k3(tok, messages, options)
                                         : chat_detail::render_qwen3(tok, messages, options);
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected JSON type somewhere in the messages or options.
    fail("chat: malformed messages or options: ", e.what());
  }
}

}  // namespace sluice::tokenizer
