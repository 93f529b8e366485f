// Reply parsers: split generated output into reasoning, content and tool calls. K3 works on ids
// (its markers are special tokens around ordinary tag names); Qwen3 works on decoded text. Both
// accept partial output, which ReplyStream uses to emit streaming deltas that never need retracting.
#include <algorithm>

#include "core/error.h"
#include "tokenizer/chat_internal.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {

// Parses `name key="value" ...` (values unescaped from &amp; and &quot;).
std::string tag_name(const std::string& tag, std::vector<std::pair<std::string, std::string>>& attrs) {
  size_t sp = tag.find(' ');
  std::string name = tag.substr(0, sp);
  for (size_t pos = sp; pos != std::string::npos && pos < tag.size();) {
    size_t eq = tag.find("=\"", pos);
    if (eq == std::string::npos) break;
    size_t end = tag.find('"', eq + 2);
    if (end == std::string::npos) break;
    std::string key = tag.substr(pos + 1, eq - pos - 1), value = tag.substr(eq + 2, end - eq - 2), plain;
    for (size_t i = 0; i < value.size();) {
      if (value.compare(i, 5, "&amp;") == 0) plain += '&', i += 5;
      else if (value.compare(i, 6, "&quot;") == 0) plain += '"', i += 6;
      else plain += value[i++];
    }
    attrs.emplace_back(key, plain);
    pos = end + 1;
  }
  return name;
}

std::string attr(const std::vector<std::pair<std::string, std::string>>& attrs, const char* key) {
  for (const auto& [k, v] : attrs)
    if (k == key) return v;
  return "";
}

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t len = std::min(s.size(), marker.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

std::string trim_newlines(const std::string& s, bool left, bool right) {
  size_t b = left ? std::min(s.find_first_not_of('\n'), s.size()) : 0;
  size_t e = s.size();
  if (right) {
    size_t last = s.find_last_not_of('\n');
    e = last == std::string::npos ? b : last + 1;
  }
  return e > b ? s.substr(b, e - b) : std::string();
}

// Qwen3 parse; `final` false withholds text that may still become a marker or be stripped.
ParsedReply parse_qwen3(std::string_view text, bool opened_think, bool final) {
  ParsedReply r;
  size_t end = text.find("<|im_end|>");
  if (end != std::string_view::npos) {
    text = text.substr(0, end);
    r.complete = true;
    final = true;
  }
  size_t pos = 0;
  bool in_think = opened_think;
  if (!in_think) {
    size_t first = std::min(text.find_first_not_of('\n'), text.size());
    std::string_view rest = text.substr(first);
    if (rest.substr(0, 7) == "<think>") {
      in_think = true;
      pos = first + 7;
    } else if (!final && partial_marker_suffix(rest, "<think>") == rest.size()) {
      return r;  // could still be "<think>"
    }
  }
  if (in_think) {
    size_t close = text.find("</think>", pos);
    if (close == std::string_view::npos) {
      std::string body(text.substr(pos));
      if (!final) body.resize(body.size() - partial_marker_suffix(body, "</think>"));
      r.reasoning = trim_newlines(body, true, true);  // trailing newlines are stripped at </think>
      return r;
    }
    r.reasoning = trim_newlines(std::string(text.substr(pos, close - pos)), true, true);
    pos = close + 8;
    while (pos < text.size() && text[pos] == '\n') ++pos;
  }
  // Content with <tool_call>{json}</tool_call> blocks taken out (newlines next to them dropped).
  std::string content;
  while (pos <= text.size()) {
    size_t open = text.find("<tool_call>", pos);
    if (open == std::string_view::npos) {
      std::string tail(text.substr(pos));
      if (!final) {
        tail.resize(tail.size() - std::max(partial_marker_suffix(tail, "<tool_call>"), partial_marker_suffix(tail, "<|im_end|>")));
        tail = trim_newlines(tail, false, true);
      }
      content += tail;
      break;
    }
    content += trim_newlines(std::string(text.substr(pos, open - pos)), false, true);
    size_t close = text.find("</tool_call>", open);
    if (close == std::string_view::npos) {
      if (final) content += std::string(text.substr(open));
      break;
    }
    std::string inner(text.substr(open + 11, close - open - 11));
    ChatJson call = ChatJson::parse(inner, nullptr, false);
    if (!call.is_discarded() && call.is_object() && call.contains("name") && call["name"].is_string()) {
      ChatJson args = call.value("arguments", ChatJson::object());
      r.tool_calls.push_back(ParsedToolCall{call["name"].get<std::string>(),
                                            args.is_string() ? args.get<std::string>() : args.dump()});
    } else {
      content += std::string(text.substr(open, close + 12 - open));
    }
    pos = close + 12;
    while (pos < text.size() && text[pos] == '\n') ++pos;
  }
  r.content = std::move(content);
  return r;
}

}  // namespace

ParsedReply parse_k3_reply(const Tokenizer& tok, std::span<const int32_t> ids, bool opened_think) {
  const int32_t open = chat_detail::require_special(tok, "<|open|>", "Kimi K3");
  const int32_t close = chat_detail::require_special(tok, "<|close|>", "Kimi K3");
  const int32_t sep = chat_detail::require_special(tok, "<|sep|>", "Kimi K3");
  const int32_t end = chat_detail::require_special(tok, "<|end_of_msg|>", "Kimi K3");
  enum class Mode { none, reasoning, content, argument, json };
  ParsedReply r;
  Mode mode = opened_think ? Mode::reasoning : Mode::content;
  bool in_tag = false, tag_is_open = false;
  std::string tag, value, arg_key, arg_type, json_block, call_name;
  ChatJson args = ChatJson::object();
  bool has_json_block = false;
  for (int32_t id : ids) {
    if (id == end) {
      r.complete = true;
      break;
    }
    if (id == open || id == close) {
      in_tag = true;
      tag_is_open = id == open;
      tag.clear();
      continue;
    }
    if (id == sep) {
      if (!in_tag) continue;
      in_tag = false;
      std::vector<std::pair<std::string, std::string>> attrs;
      std::string name = tag_name(tag, attrs);
      if (tag_is_open) {
        if (name == "think") mode = Mode::reasoning;
        else if (name == "response") mode = Mode::content;
        else if (name == "call") call_name = attr(attrs, "tool"), args = ChatJson::object(), has_json_block = false, mode = Mode::none;
        else if (name == "argument") arg_key = attr(attrs, "key"), arg_type = attr(attrs, "type"), value.clear(), mode = Mode::argument;
        else if (name == "json") json_block.clear(), has_json_block = true, mode = Mode::json;
        else mode = Mode::none;
      } else {
        if (name == "argument" && mode == Mode::argument) {
          ChatJson v = arg_type == "string" ? ChatJson(value) : ChatJson::parse(value, nullptr, false);
          args[arg_key] = v.is_discarded() ? ChatJson(value) : v;
        } else if (name == "call") {
          r.tool_calls.push_back(ParsedToolCall{call_name, has_json_block ? json_block : args.dump()});
        }
        mode = Mode::none;
      }
      continue;
    }
    if (tok.is_special(id)) continue;  // stray specials carry no text
    std::string_view bytes = tok.token_bytes(id);
    if (in_tag) tag += bytes;
    else if (mode == Mode::reasoning) r.reasoning += bytes;
    else if (mode == Mode::content) r.content += bytes;
    else if (mode == Mode::argument) value += bytes;
    else if (mode == Mode::json) json_block += bytes;
  }
  return r;
}

ParsedReply parse_qwen3_reply(std::string_view text, bool opened_think) { return parse_qwen3(text, opened_think, true); }

ReplyStream::ReplyStream(const Tokenizer& tokenizer, ChatFormat format, bool prompt_opened_think)
    : tokenizer_(tokenizer), format_(format), opened_think_(prompt_opened_think) {}

ReplyStream::Delta ReplyStream::push(std::span<const int32_t> ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  return advance(false);
}

ReplyStream::Delta ReplyStream::advance(bool final) {
  ParsedReply r = format_ == ChatFormat::kimi_k3 ? parse_k3_reply(tokenizer_, ids_, opened_think_)
                                                 : parse_qwen3(tokenizer_.decode(ids_), opened_think_, final);
  Delta d;
  auto take = [&](const std::string& all, size_t& sent, std::string& out) {
    if (all.size() <= sent) return;
    // Hold back a trailing incomplete UTF-8 sequence until its remaining bytes arrive.
    size_t upto = all.size() - (final ? 0 : utf8_incomplete_tail(all));
    if (upto <= sent) return;
    out = all.substr(sent, upto - sent);
    sent = upto;
  };
  take(r.reasoning, sent_reasoning_, d.reasoning);
  take(r.content, sent_content_, d.content);
  return d;
}

ParsedReply ReplyStream::finish() {
  ParsedReply r = format_ == ChatFormat::kimi_k3 ? parse_k3_reply(tokenizer_, ids_, opened_think_)
                                                 : parse_qwen3(tokenizer_.decode(ids_), opened_think_, true);
  ids_.clear();
  sent_reasoning_ = sent_content_ = 0;
  return r;
}

}  // namespace sluice::tokenizer
