// Reply parsers for K3 and Qwen3, and ReplyStream: split generated output into reasoning, content
// and tool calls. K3 works on ids (its markers are special tokens around ordinary tag names); Qwen3
// works on the decoded text. Both are incremental state machines that only ever append to their
// results, so ReplyStream's deltas never need retracting and a long reply costs linear time. The
// other formats' parsers live in chat_parse_*.cpp.
#include <algorithm>

#include "core/error.h"
#include "format/json_util.h"
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

// K3: <|open|>/<|close|> start a tag whose ordinary tokens up to <|sep|> are its name/attributes.
class K3Parser final : public ReplyStream::Parser {
 public:
  K3Parser(const Tokenizer& tok, bool opened_think)
      : open_(chat_detail::require_special(tok, "<|open|>", "Kimi K3")),
        close_(chat_detail::require_special(tok, "<|close|>", "Kimi K3")),
        sep_(chat_detail::require_special(tok, "<|sep|>", "Kimi K3")),
        end_(chat_detail::require_special(tok, "<|end_of_msg|>", "Kimi K3")),
        mode_(opened_think ? Mode::reasoning : Mode::content) {}

  void feed(const Tokenizer& tok, std::span<const int32_t> ids) override {
    for (int32_t id : ids) {
      if (reply.complete) return;
      if (id == end_) {
        reply.complete = true;
      } else if (id == open_ || id == close_) {
        in_tag_ = true;
        tag_is_open_ = id == open_;
        tag_.clear();
      } else if (id == sep_) {
        if (in_tag_) end_tag();
      } else if (!tok.is_special(id)) {  // stray specials carry no text
        std::string_view bytes = tok.generated_bytes(id);
        if (in_tag_) tag_ += bytes;
        else if (mode_ == Mode::reasoning) reply.reasoning += bytes;
        else if (mode_ == Mode::content) reply.content += bytes;
        else if (mode_ == Mode::argument) value_ += bytes;
        else if (mode_ == Mode::json) json_block_ += bytes;
      }
    }
  }
  void finish() override {}

 private:
  enum class Mode { none, reasoning, content, argument, json };

  void end_tag() {
    in_tag_ = false;
    std::vector<std::pair<std::string, std::string>> attrs;
    std::string name = tag_name(tag_, attrs);
    if (tag_is_open_) {
      mode_ = Mode::none;
      if (name == "think") {
        mode_ = Mode::reasoning;
      } else if (name == "response") {
        mode_ = Mode::content;
      } else if (name == "call") {
        call_name_ = attr(attrs, "tool");
        args_ = ChatJson::object();
        has_json_block_ = false;
      } else if (name == "argument") {
        arg_key_ = attr(attrs, "key");
        arg_type_ = attr(attrs, "type");
        value_.clear();
        mode_ = Mode::argument;
      } else if (name == "json") {
        json_block_.clear();
        has_json_block_ = true;
        mode_ = Mode::json;
      }
      return;
    }
    if (name == "argument" && mode_ == Mode::argument) {
      ChatJson v = arg_type_ == "string" ? ChatJson(value_) : format::parse_json_or_discarded<ChatJson>(value_);
      args_[arg_key_] = v.is_discarded() ? ChatJson(value_) : v;
    } else if (name == "call") {
      reply.tool_calls.push_back(ParsedToolCall{call_name_, has_json_block_ ? json_block_ : args_.dump()});
    }
    mode_ = Mode::none;
  }

  int32_t open_, close_, sep_, end_;
  Mode mode_;
  bool in_tag_ = false, tag_is_open_ = false, has_json_block_ = false;
  std::string tag_, value_, arg_key_, arg_type_, json_block_, call_name_;
  ChatJson args_ = ChatJson::object();
};

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t len = std::min(s.size(), marker.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

size_t trailing_newlines(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[s.size() - 1 - n] == '\n') ++n;
  return n;
}

// Qwen3: optional "<think>" reasoning "</think>" (newlines around it stripped), then content in
// which "<tool_call>{json}</tool_call>" blocks become tool calls (newlines next to them dropped).
class Qwen3Parser final : public ReplyStream::Parser {
 public:
  explicit Qwen3Parser(bool opened_think) : stage_(opened_think ? Stage::think : Stage::start) {}

  void feed(const Tokenizer& tok, std::span<const int32_t> ids) override {
    if (reply.complete) return;  // nothing after <|im_end|> belongs to the reply
    for (int32_t id : ids) text_ += tok.generated_bytes(id);
    run(false);
  }
  void feed_text(std::string_view text) {
    if (reply.complete) return;
    text_ += text;
    run(false);
  }
  void finish() override { run(true); }

 private:
  enum class Stage { start, think, content, call, done };
  static constexpr std::string_view kThink = "<think>", kThinkEnd = "</think>", kCall = "<tool_call>",
                                    kCallEnd = "</tool_call>", kEnd = "<|im_end|>";

  // Finds `marker` at or after pos_, remembering how far the text has been searched.
  size_t find(std::string_view marker) {
    size_t from = std::max(pos_, scanned_ >= marker.size() ? scanned_ - marker.size() + 1 : 0);
    size_t at = std::string_view(text_).find(marker, from);
    scanned_ = at == std::string_view::npos ? text_.size() : at;
    return at;
  }

  void run(bool final) {
    if (!reply.complete) {
      size_t from = end_scanned_ >= kEnd.size() ? end_scanned_ - kEnd.size() + 1 : 0;
      size_t end = std::string_view(text_).find(kEnd, from);
      end_scanned_ = text_.size();
      if (end != std::string_view::npos) {
        text_.resize(end);
        reply.complete = true;
      }
    }
    final = final || reply.complete;
    std::string_view t = text_;
    while (true) {
      if (stage_ == Stage::start) {
        size_t first = std::min(t.find_first_not_of('\n'), t.size());
        std::string_view rest = t.substr(first);
        if (rest.substr(0, kThink.size()) == kThink) {
          stage_ = Stage::think;
          pos_ = scanned_ = first + kThink.size();
          skip_newlines_ = true;
        } else if (!final && partial_marker_suffix(rest, kThink) == rest.size()) {
          return;  // could still become "<think>"
        } else {
          stage_ = Stage::content;
        }
      } else if (stage_ == Stage::think) {
        if (skip_newlines_) {
          while (pos_ < t.size() && t[pos_] == '\n') ++pos_;
          if (pos_ < t.size()) skip_newlines_ = false;
        }
        size_t close = find(kThinkEnd);
        if (close == std::string_view::npos) {
          std::string_view body = t.substr(pos_);
          // Withhold a possible start of "</think>" (and the newlines it would strip) or "<|im_end|>".
          size_t partial = final ? 0 : std::max(partial_marker_suffix(body, kThinkEnd), partial_marker_suffix(body, kEnd));
          size_t keep = partial + trailing_newlines(body.substr(0, body.size() - partial));
          reply.reasoning += body.substr(0, body.size() - keep);
          pos_ += body.size() - keep;
          if (final) stage_ = Stage::done;
          return;
        }
        std::string_view body = t.substr(pos_, close - pos_);
        reply.reasoning += body.substr(0, body.size() - trailing_newlines(body));
        stage_ = Stage::content;
        pos_ = scanned_ = close + kThinkEnd.size();
        skip_newlines_ = true;
      } else if (stage_ == Stage::content) {
        if (skip_newlines_) {
          while (pos_ < t.size() && t[pos_] == '\n') ++pos_;
          if (pos_ < t.size() || final) skip_newlines_ = false;
          else return;
        }
        size_t open = find(kCall);
        if (open == std::string_view::npos) {
          std::string_view body = t.substr(pos_);
          size_t keep = 0;
          if (!final) {
            size_t partial = std::max(partial_marker_suffix(body, kCall), partial_marker_suffix(body, kEnd));
            keep = partial + trailing_newlines(body.substr(0, body.size() - partial));
          }
          reply.content += body.substr(0, body.size() - keep);
          pos_ += body.size() - keep;
          if (final) stage_ = Stage::done;
          return;
        }
        std::string_view body = t.substr(pos_, open - pos_);
        reply.content += body.substr(0, body.size() - trailing_newlines(body));
        stage_ = Stage::call;
        pos_ = scanned_ = open;
      } else if (stage_ == Stage::call) {
        size_t close = find(kCallEnd);
        if (close == std::string_view::npos) {
          if (final) {
            reply.content += t.substr(pos_);
            stage_ = Stage::done;
          }
          return;
        }
        std::string inner(t.substr(pos_ + kCall.size(), close - pos_ - kCall.size()));
        ChatJson call = format::parse_json_or_discarded<ChatJson>(inner);
        if (!call.is_discarded() && call.is_object() && call.contains("name") && call["name"].is_string()) {
          ChatJson args = call.value("arguments", ChatJson::object());
          reply.tool_calls.push_back(
              ParsedToolCall{call["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()});
        } else {
          reply.content += t.substr(pos_, close + kCallEnd.size() - pos_);
        }
        stage_ = Stage::content;
        pos_ = scanned_ = close + kCallEnd.size();
        skip_newlines_ = true;
      } else {
        return;
      }
    }
  }

  std::string text_;
  Stage stage_;
  size_t pos_ = 0, scanned_ = 0, end_scanned_ = 0;
  bool skip_newlines_ = false;
};

}  // namespace

ParsedReply parse_k3_reply(const Tokenizer& tok, std::span<const int32_t> ids, bool opened_think) {
  K3Parser p(tok, opened_think);
  p.feed(tok, ids);
  p.finish();
  return std::move(p.reply);
}

ParsedReply parse_qwen3_reply(std::string_view text, bool opened_think) {
  Qwen3Parser p(opened_think);
  p.feed_text(text);
  p.finish();
  return std::move(p.reply);
}

namespace chat_detail {
std::unique_ptr<ReplyStream::Parser> make_k3_parser(const Tokenizer& tok, bool opened_think) {
  return std::make_unique<K3Parser>(tok, opened_think);
}
std::unique_ptr<ReplyStream::Parser> make_qwen3_parser(bool opened_think) {
  return std::make_unique<Qwen3Parser>(opened_think);
}
}  // namespace chat_detail

ReplyStream::ReplyStream(const Tokenizer& tokenizer, ChatFormat format, bool prompt_opened_think)
    : tokenizer_(tokenizer) {
  switch (format) {
    case ChatFormat::kimi_k3: parser_ = chat_detail::make_k3_parser(tokenizer, prompt_opened_think); break;
    case ChatFormat::qwen3: parser_ = chat_detail::make_qwen3_parser(prompt_opened_think); break;
    case ChatFormat::deepseek_v3:
    case ChatFormat::deepseek_v3_0324: parser_ = chat_detail::make_deepseek_parser(tokenizer); break;
    case ChatFormat::kimi_k2:
    case ChatFormat::kimi_k2_thinking: parser_ = chat_detail::make_kimi_k2_parser(tokenizer, prompt_opened_think); break;
    case ChatFormat::gpt_oss: parser_ = chat_detail::make_harmony_parser(tokenizer); break;
  }
}

ParsedReply parse_reply(const Tokenizer& tok, ChatFormat format, std::span<const int32_t> ids, bool opened_think) {
  ReplyStream stream(tok, format, opened_think);
  stream.push(ids);
  return stream.finish();
}

ReplyStream::~ReplyStream() = default;

ReplyStream::Delta ReplyStream::push(std::span<const int32_t> ids) {
  parser_->feed(tokenizer_, ids);
  return take(false);
}

ReplyStream::Delta ReplyStream::take(bool final) {
  Delta d;
  auto take_one = [&](const std::string& all, size_t& sent, std::string& out) {
    // Hold back a trailing incomplete UTF-8 sequence until its remaining bytes arrive.
    size_t upto = all.size() - (final ? 0 : utf8_incomplete_tail(all));
    if (upto <= sent) return;
    out = all.substr(sent, upto - sent);
    sent = upto;
  };
  take_one(parser_->reply.reasoning, sent_reasoning_, d.reasoning);
  take_one(parser_->reply.content, sent_content_, d.content);
  return d;
}

ReplyStream::Delta ReplyStream::flush() {
  parser_->finish();
  return take(true);
}

ParsedReply ReplyStream::finish() {
  parser_->finish();
  return parser_->reply;
}

}  // namespace sluice::tokenizer
