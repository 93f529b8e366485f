#include "runtime/guided_reply.h"

#include "core/error.h"
#include "guide/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {
namespace {

int32_t need(const tokenizer::Tokenizer& tok, const char* spelling, const char* model) {
  const auto id = tok.special_id(spelling);
  SLUICE_CHECK(id.has_value(), "guided decoding: the ", model, " tokenizer has no ", spelling);
  return *id;
}

std::string terminal(int32_t id) { return cat("<[", id, "]>"); }

// `text` as a GBNF string literal.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Each tool's arguments grammar (start rule tool<i>-root) and the alternatives of `call_rule`,
// made by `call(i, name)`.
template <typename Call>
std::string tool_rules(const std::vector<GuidedTool>& tools, Call&& call) {
  SLUICE_CHECK(!tools.empty(), "guided decoding: no tool to call");
  std::string rules = "call ::= ";
  for (size_t i = 0; i < tools.size(); ++i) rules += (i ? " | " : "") + call(i, tools[i].name);
  rules += "\n";
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = cat("tool", i, "-");
    try {
      rules += tools[i].parameters.is_null() ? guide::json_any_object_gbnf(prefix)
                                             : guide::json_schema_gbnf(tools[i].parameters, prefix);
    } catch (const Error& e) {
      fail("tool '", tools[i].name, "': ", e.what());
    }
  }
  return rules;
}

}  // namespace

GuidedReply guided_tool_calls(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking,
                              const std::vector<GuidedTool>& tools, bool parallel) {
  GuidedReply r;
  std::string root;
  const std::string calls = parallel ? "call+ " : "call ";
  switch (format) {
    case tokenizer::ChatFormat::kimi_k3: {
      const std::string open = terminal(need(tok, "<|open|>", "Kimi K3")), sep = terminal(need(tok, "<|sep|>", "Kimi K3"));
      const int32_t close_id = need(tok, "<|close|>", "Kimi K3");
      const std::string close = terminal(close_id);
      // As K3's renderer writes an assistant turn with calls: an (here empty) response block, then
      // the tools block; attribute values escape & and " as the renderer does.
      auto xtml = [](const std::string& v) {
        std::string out;
        for (char c : v) out += c == '&' ? std::string("&amp;") : c == '"' ? std::string("&quot;") : std::string(1, c);
        return out;
      };
      // Without thinking the generation prompt opened the response block already.
      const std::string opening = thinking ? "\"think\" " + sep + " " + open + " \"response\" " + sep + " " : "";
      if (thinking) r.starts_after = close_id;
      root = "root ::= " + opening + close + " \"response\" " + sep + " " + open + " \"tools\" " + sep + " " + calls +
             close + " \"tools\" " + sep + " " + close + " \"message\" " + sep + "\n";
      root += tool_rules(tools, [&](size_t i, const std::string& name) {
        return "( " + open + " " + literal("call tool=\"" + xtml(name) + "\" index=\"") + " [1-9] [0-9]? \"\\\"\" " + sep +
               " " + open + " \"json type=\\\"object\\\"\" " + sep + " " + cat("tool", i, "-root ") + close +
               " \"json\" " + sep + " " + close + " \"call\" " + sep + " )";
      });
      break;
    }
    case tokenizer::ChatFormat::qwen3: {
      // Qwen3's template: <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, one per call.
      const std::string call_open = terminal(need(tok, "<tool_call>", "Qwen3")),
                        call_close = terminal(need(tok, "</tool_call>", "Qwen3"));
      if (thinking) r.starts_after = need(tok, "</think>", "Qwen3");
      root = std::string("root ::= ") + (thinking ? "\"\\n\"? \"\\n\"? " : "") + (parallel ? "call ( \"\\n\" call )*\n" : "call\n");
      root += tool_rules(tools, [&](size_t i, const std::string& name) {
        return "( " + call_open + " " + literal("\n{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ") +
               " " + cat("tool", i, "-root") + " " + literal("}\n") + " " + call_close + " )";
      });
      break;
    }
    default:
      fail("guided decoding (response_format, tool_choice) is not supported for the ",
           tokenizer::chat_format_name(format), " chat format yet (supported: kimi_k3, qwen3)");
  }
  r.grammar = std::make_shared<const guide::Grammar>(guide::parse_gbnf(root));
  return r;
}

GuidedReply guided_reply(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking,
                         const std::string& content_gbnf) {
  GuidedReply r;
  std::string root;
  switch (format) {
    case tokenizer::ChatFormat::kimi_k3: {
      // <|close|>think<|sep|> ends the reasoning; the response block, then the message closes
      // (<|end_of_msg|>, the model's end token, follows).
      const std::string open = terminal(need(tok, "<|open|>", "Kimi K3")),
                        sep = terminal(need(tok, "<|sep|>", "Kimi K3"));
      const int32_t close_id = need(tok, "<|close|>", "Kimi K3");
      const std::string close = terminal(close_id);
      const std::string tail = " content-root " + close + " \"response\" " + sep + " " + close + " \"message\" " + sep;
      if (thinking) {
        r.starts_after = close_id;
        root = "root ::= \"think\" " + sep + " " + open + " \"response\" " + sep + tail + "\n";
      } else {
        root = "root ::=" + tail + "\n";
      }
      break;
    }
    case tokenizer::ChatFormat::qwen3: {
      // "<think>\n...\n</think>\n\n" then the content; with thinking off the template has written
      // the empty think block into the prompt already.
      if (thinking) {
        r.starts_after = need(tok, "</think>", "Qwen3");
        root = "root ::= \"\\n\"? \"\\n\"? content-root\n";
      } else {
        root = "root ::= content-root\n";
      }
      break;
    }
    default:
      fail("guided decoding (response_format, tool_choice) is not supported for the ",
           tokenizer::chat_format_name(format), " chat format yet (supported: kimi_k3, qwen3)");
  }
  r.grammar = std::make_shared<const guide::Grammar>(guide::parse_gbnf(root + content_gbnf));
  return r;
}

}  // namespace sluice::runtime
