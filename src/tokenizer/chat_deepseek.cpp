// DeepSeek-V3 chat rendering: a port of the chat template in deepseek-ai/DeepSeek-V3's
// tokenizer_config.json as first released and of DeepSeek-V3-0324's revision of it (both committed
// under tests/fixtures/tokenizer/templates/). System messages are joined after the BOS; tool calls
// are ```json blocks between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>; tool results are grouped
// between <｜tool▁outputs▁begin｜> and <｜tool▁outputs▁end｜>. Neither template prints tool
// declarations. The first release's quirks are kept (is_first and is_output_first are never reset,
// an assistant turn with content drops its tool calls, each later call of a turn closes the
// section again): the render must be the one the model was served with.
#include "core/error.h"
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

const char* const kBos = "<｜begin▁of▁sentence｜>";
const char* const kEos = "<｜end▁of▁sentence｜>";
const char* const kUser = "<｜User｜>";
const char* const kAssistant = "<｜Assistant｜>";
const char* const kCallsBegin = "<｜tool▁calls▁begin｜>";
const char* const kCallsEnd = "<｜tool▁calls▁end｜>";
const char* const kCallBegin = "<｜tool▁call▁begin｜>";
const char* const kCallEnd = "<｜tool▁call▁end｜>";
const char* const kSep = "<｜tool▁sep｜>";
const char* const kOutputsBegin = "<｜tool▁outputs▁begin｜>";
const char* const kOutputsEnd = "<｜tool▁outputs▁end｜>";
const char* const kOutputBegin = "<｜tool▁output▁begin｜>";
const char* const kOutputEnd = "<｜tool▁output▁end｜>";

const std::vector<std::string_view> kSpecials = {kBos,      kEos,      kUser,          kAssistant,  kCallsBegin,
                                                 kCallsEnd, kCallBegin, kCallEnd,      kSep,        kOutputsBegin,
                                                 kOutputsEnd, kOutputBegin, kOutputEnd};

// The template concatenates the arguments: JSON text. Objects (which the template cannot take) are
// printed as Python json.dumps would (adapt_tool_arguments does the same).
std::string arguments_text(const ChatJson& fn) {
  auto it = fn.find("arguments");
  if (it == fn.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : python_json_dumps(*it, false);
}

// type<｜tool▁sep｜>name\n```json\nargs\n```<｜tool▁call▁end｜> (after <｜tool▁call▁begin｜>).
void write_call(TemplateWriter& w, const ChatJson& call, const std::string& where) {
  SLUICE_CHECK(call.is_object(), where, ": a tool call must be an object");
  const ChatJson& fn = call_function(call);
  SLUICE_CHECK(fn.contains("name"), where, ": a tool call lacks a name");
  w.text(call.contains("type") ? python_str(call["type"]) : std::string("function"));
  w.literal(kSep);
  w.text(python_str(fn["name"]));
  w.literal("\n```json\n");
  w.text(arguments_text(fn));
  w.literal("\n```");
  w.literal(kCallEnd);
}

bool is_null_field(const ChatJson& m, const char* key) { return !m.contains(key) || m[key].is_null(); }

}  // namespace

RenderedChat render_deepseek_v3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& o,
                                bool revision_0324) {
  TemplateWriter w(kSpecials);
  auto role = [&](const ChatJson& m) { return m["role"].get<std::string>(); };
  std::string system;
  bool first_system = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (role(messages[i]) != "system") continue;
    if (!first_system) system += "\n\n";
    system += content_text(messages[i].value("content", ChatJson()), cat("chat: messages[", i, "]"));
    first_system = false;
  }
  w.literal(kBos);
  w.text(system);
  bool is_first = false, is_tool = false, is_output_first = true, is_last_user = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatJson& m = messages[i];
    const std::string r = role(m), where = cat("chat: messages[", i, "]");
    const std::string content = content_text(m.value("content", ChatJson()), where);
    if (r == "user") {
      is_tool = false;
      w.literal(kUser);
      w.text(content);
      if (revision_0324) {
        is_first = false;
        is_last_user = true;
        w.literal(kAssistant);
      }
    } else if (r == "assistant" && revision_0324) {
      is_last_user = false;
      if (!is_null_field(m, "tool_calls")) {
        if (is_tool) w.literal(kOutputsEnd);
        is_first = false;
        is_tool = false;
        is_output_first = true;
        const ChatJson& calls = m["tool_calls"];
        SLUICE_CHECK(calls.is_array(), where, ".tool_calls must be an array");
        for (size_t k = 0; k < calls.size(); ++k) {
          if (!is_first) {
            if (!is_null_field(m, "content")) w.text(content);
            w.literal(kCallsBegin);
            w.literal(kCallBegin);
            is_first = true;
          } else {
            w.literal("\n");
            w.literal(kCallBegin);
          }
          write_call(w, calls[k], cat(where, ".tool_calls[", k, "]"));
        }
        w.literal(kCallsEnd);
        w.literal(kEos);
      } else {
        if (is_tool) w.literal(kOutputsEnd);
        is_tool = false;
        w.text(content);
        w.literal(kEos);
      }
    } else if (r == "assistant") {
      if (is_null_field(m, "content")) {
        is_tool = false;
        const ChatJson calls = m.value("tool_calls", ChatJson::array());
        for (size_t k = 0; calls.is_array() && k < calls.size(); ++k) {
          if (!is_first) {
            w.literal(kAssistant);
            w.literal(kCallsBegin);
            w.literal(kCallBegin);
            write_call(w, calls[k], cat(where, ".tool_calls[", k, "]"));
            is_first = true;
          } else {
            w.literal("\n");
            w.literal(kCallBegin);
            write_call(w, calls[k], cat(where, ".tool_calls[", k, "]"));
            w.literal(kCallsEnd);
            w.literal(kEos);
          }
        }
      } else {
        if (is_tool) {
          w.literal(kOutputsEnd);
          is_tool = false;
        } else {
          w.literal(kAssistant);
        }
        w.text(content);
        w.literal(kEos);
      }
    } else if (r == "tool") {
      is_last_user = false;
      is_tool = true;
      if (is_output_first) {
        w.literal(kOutputsBegin);
        is_output_first = false;
      } else {
        w.literal("\n");
      }
      w.literal(kOutputBegin);
      w.text(content);
      w.literal(kOutputEnd);
    }
  }
  if (is_tool) w.literal(kOutputsEnd);
  if (o.add_generation_prompt && !is_tool && !(revision_0324 && is_last_user)) w.literal(kAssistant);
  return encode_segments(tok, std::move(w.segments), revision_0324 ? "DeepSeek-V3-0324" : "DeepSeek-V3", o.max_ids);
}

}  // namespace sluice::tokenizer::chat_detail
