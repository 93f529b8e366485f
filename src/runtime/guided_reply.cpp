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

// What a format writes around the part the grammar constrains: the token that ends free
// reasoning, the GBNF between that token and the content, and K3's markers as terminals. Throws
// for a format without a guided form.
struct Frame {
  int32_t starts_after = -1;
  std::string opening;
  std::string open, sep, close;  // K3 only
};

Frame frame(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking) {
  Frame f;
  switch (format) {
    case tokenizer::ChatFormat::kimi_k3: {
      // <|close|>think<|sep|> ends the reasoning and the response block opens; without thinking
      // the generation prompt opened the response block already.
      f.open = terminal(need(tok, "<|open|>", "Kimi K3"));
      f.sep = terminal(need(tok, "<|sep|>", "Kimi K3"));
      const int32_t close_id = need(tok, "<|close|>", "Kimi K3");
      f.close = terminal(close_id);
      if (thinking) {
        f.starts_after = close_id;
        f.opening = "\"think\" " + f.sep + " " + f.open + " \"response\" " + f.sep + " ";
      }
      return f;
    }
    case tokenizer::ChatFormat::qwen3:
      // "<think>\n...\n</think>\n\n" then the content; without thinking the template has written
      // the empty think block into the prompt already.
      if (thinking) {
        f.starts_after = need(tok, "</think>", "Qwen3");
        f.opening = "\"\\n\"? \"\\n\"? ";
      }
      return f;
    default:
      fail("guided decoding (response_format, tool_choice) is not supported for the ",
           tokenizer::chat_format_name(format), " chat format yet (supported: kimi_k3, qwen3)");
  }
}

}  // namespace

GuidedReply guided_tool_calls(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking,
                              const std::vector<GuidedTool>& tools, bool parallel) {
  const Frame f = frame(tok, format, thinking);
  std::string root;
  if (format == tokenizer::ChatFormat::kimi_k3) {
    // As K3's renderer writes an assistant turn with calls: an (here empty) response block, then
    // the tools block; attribute values escape & and " as the renderer does.
    auto xtml = [](const std::string& v) {
      std::string out;
      for (char c : v) out += c == '&' ? std::string("&amp;") : c == '"' ? std::string("&quot;") : std::string(1, c);
      return out;
    };
    root = "root ::= " + f.opening + f.close + " \"response\" " + f.sep + " " + f.open + " \"tools\" " + f.sep +
           (parallel ? " call+ " : " call ") + f.close + " \"tools\" " + f.sep + " " + f.close + " \"message\" " +
           f.sep + "\n";
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      return "( " + f.open + " " + literal("call tool=\"" + xtml(name) + "\" index=\"") + " [1-9] [0-9]? \"\\\"\" " +
             f.sep + " " + f.open + " \"json type=\\\"object\\\"\" " + f.sep + " " + cat("tool", i, "-root ") + f.close +
             " \"json\" " + f.sep + " " + f.close + " \"call\" " + f.sep + " )";
    });
  } else {  // Qwen3: <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, one per call
    const std::string call_open = terminal(need(tok, "<tool_call>", "Qwen3")),
                      call_close = terminal(need(tok, "</tool_call>", "Qwen3"));
    root = "root ::= " + f.opening + (parallel ? "call ( \"\\n\" call )*\n" : "call\n");
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      return "( " + call_open + " " + literal("\n{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ") +
             " " + cat("tool", i, "-root") + " " + literal("}\n") + " " + call_close + " )";
    });
  }
  return {std::make_shared<const guide::Grammar>(guide::parse_gbnf(root)), f.starts_after};
}

GuidedReply guided_reply(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking,
                         const std::string& content_gbnf) {
  const Frame f = frame(tok, format, thinking);
  std::string root = "root ::= " + f.opening + "content-root";
  // K3 closes the response block and the message (<|end_of_msg|>, the model's end token, follows).
  if (format == tokenizer::ChatFormat::kimi_k3)
    root += " " + f.close + " \"response\" " + f.sep + " " + f.close + " \"message\" " + f.sep;
  return {std::make_shared<const guide::Grammar>(guide::parse_gbnf(root + "\n" + content_gbnf)), f.starts_after};
}

}  // namespace sluice::runtime
