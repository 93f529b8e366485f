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

// The GBNF terminal of a special token the format needs (need()'s error when it is missing).
std::string marker(const tokenizer::Tokenizer& tok, const char* spelling, const char* model) {
  return terminal(need(tok, spelling, model));
}

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
// reasoning, the GBNF between that token (or the reply's start) and the content or calls, and
// K3's markers as terminals. Throws for a format without a guided form.
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
      f.open = marker(tok, "<|open|>", "Kimi K3");
      f.sep = marker(tok, "<|sep|>", "Kimi K3");
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
    case tokenizer::ChatFormat::kimi_k2_thinking:
      // Always reasons: <think>...</think>, then the content or the tool-call section.
      f.starts_after = need(tok, "</think>", "Kimi K2 Thinking");
      return f;
    case tokenizer::ChatFormat::kimi_k2:
    case tokenizer::ChatFormat::deepseek_v3:
    case tokenizer::ChatFormat::deepseek_v3_0324:
      return f;  // they do not reason: the reply is the content or the calls
    case tokenizer::ChatFormat::gpt_oss: {
      // The prompt ends in <|start|>assistant. The reasoning is analysis messages, free text
      // each, before the message the grammar constrains (inside the grammar: harmony has no one
      // token that ends all reasoning, and a model that skips it goes straight to the answer).
      const std::string channel = marker(tok, "<|channel|>", "gpt-oss"),
                        message = marker(tok, "<|message|>", "gpt-oss"),
                        end = marker(tok, "<|end|>", "gpt-oss"), start = marker(tok, "<|start|>", "gpt-oss");
      f.opening = "( " + channel + " \"analysis\" " + message + " .* " + end + " " + start + " \"assistant\" )* ";
      return f;
    }
  }
  fail("guided decoding is not supported for the ", tokenizer::chat_format_name(format), " chat format");
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
  } else if (format == tokenizer::ChatFormat::qwen3) {
    // <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, one per call.
    const std::string call_open = marker(tok, "<tool_call>", "Qwen3"),
                      call_close = marker(tok, "</tool_call>", "Qwen3");
    root = "root ::= " + f.opening + (parallel ? "call ( \"\\n\" call )*\n" : "call\n");
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      return "( " + call_open + " " + literal("\n{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ") +
             " " + cat("tool", i, "-root") + " " + literal("}\n") + " " + call_close + " )";
    });
  } else if (format == tokenizer::ChatFormat::kimi_k2 || format == tokenizer::ChatFormat::kimi_k2_thinking) {
    // The section of calls with ids functions.NAME:INDEX, as the model writes them.
    const char* model = "Kimi K2";
    const std::string section_open = marker(tok, "<|tool_calls_section_begin|>", model),
                      section_close = marker(tok, "<|tool_calls_section_end|>", model),
                      call_open = marker(tok, "<|tool_call_begin|>", model),
                      arguments = marker(tok, "<|tool_call_argument_begin|>", model),
                      call_close = marker(tok, "<|tool_call_end|>", model);
    root = "root ::= " + f.opening + section_open + (parallel ? " call+ " : " call ") + section_close + "\n";
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      return "( " + call_open + " " + literal("functions." + name + ":") + " [0-9] [0-9]? " + arguments + " " +
             cat("tool", i, "-root ") + call_close + " )";
    });
  } else if (format == tokenizer::ChatFormat::deepseek_v3 || format == tokenizer::ChatFormat::deepseek_v3_0324) {
    // As the template writes each call: function<｜tool▁sep｜>NAME, the arguments in a json fence.
    const char* model = "DeepSeek-V3";
    const std::string calls_open = marker(tok, "<｜tool▁calls▁begin｜>", model),
                      calls_close = marker(tok, "<｜tool▁calls▁end｜>", model),
                      call_open = marker(tok, "<｜tool▁call▁begin｜>", model),
                      sep = marker(tok, "<｜tool▁sep｜>", model),
                      call_close = marker(tok, "<｜tool▁call▁end｜>", model);
    root = "root ::= " + f.opening + calls_open + (parallel ? " call ( \"\\n\"? call )* " : " call ") + calls_close + "\n";
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      return "( " + call_open + " \"function\" " + sep + " " + literal(name + "\n```json\n") + " " +
             cat("tool", i, "-root ") + literal("\n```") + " " + call_close + " )";
    });
  } else {  // gpt-oss: one call per turn, on the commentary channel to functions.NAME; <|call|> ends it
    const std::string channel = marker(tok, "<|channel|>", "gpt-oss"),
                      message = marker(tok, "<|message|>", "gpt-oss"),
                      constrain = marker(tok, "<|constrain|>", "gpt-oss");
    root = "root ::= " + f.opening + "call\n";
    // The recipient before the channel (as the template writes it) or after it (as the model
    // often does); the content type " json" or " <|constrain|>json", or none.
    root += "ctype ::= ( \" json\" | \" \" " + constrain + " \"json\" )?\n";
    root += tool_rules(tools, [&](size_t i, const std::string& name) {
      const std::string to = literal(" to=functions." + name);
      return "( ( " + to + " " + channel + " \"commentary\" | " + channel + " \"commentary\" " + to + " ) ctype " +
             message + " " + cat("tool", i, "-root") + " )";
    });
  }
  return {std::make_shared<const guide::Grammar>(guide::parse_gbnf(root)), f.starts_after};
}

GuidedReply guided_reply(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking,
                         const std::string& content_gbnf) {
  const Frame f = frame(tok, format, thinking);
  std::string root = "root ::= " + f.opening;
  // gpt-oss answers on the final channel (<|return|>, an end token, follows).
  if (format == tokenizer::ChatFormat::gpt_oss)
    root += marker(tok, "<|channel|>", "gpt-oss") + " \"final\" " + marker(tok, "<|message|>", "gpt-oss") + " ";
  root += "content-root";
  // K3 closes the response block and the message (<|end_of_msg|>, the model's end token, follows).
  if (format == tokenizer::ChatFormat::kimi_k3)
    root += " " + f.close + " \"response\" " + f.sep + " " + f.close + " \"message\" " + f.sep;
  return {std::make_shared<const guide::Grammar>(guide::parse_gbnf(root + "\n" + content_gbnf)), f.starts_after};
}

}  // namespace sluice::runtime
