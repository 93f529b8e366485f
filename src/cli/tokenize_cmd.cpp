// `sluice tokenize` and `sluice detokenize`: ids for text or a rendered chat, and bytes for ids,
// with the model directory's tokenizer (or a rank file / tokenizer.json given directly).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "core/error.h"
#include "format/json_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"

namespace sluice::cli {
namespace {

struct TokenizerSource {
  std::string model_dir;
  std::string tiktoken_file;
  std::string tokenizer_json;
  std::string pattern = "kimi_k3";
};

void add_source_options(CLI::App* cmd, TokenizerSource& src) {
  cmd->add_option("--model", src.model_dir, "model directory with tiktoken.model or tokenizer.json");
  cmd->add_option("--tiktoken", src.tiktoken_file, "a tiktoken rank file instead of --model");
  cmd->add_option("--pattern", src.pattern, "pre-tokenizer for --tiktoken: kimi_k3, cl100k_base or o200k_base")
      ->check(CLI::IsMember({"kimi_k3", "cl100k_base", "o200k_base"}));
  cmd->add_option("--tokenizer-json", src.tokenizer_json, "a Hugging Face tokenizer.json instead of --model");
}

std::unique_ptr<tokenizer::Tokenizer> open_tokenizer(const TokenizerSource& src) {
  int given = !src.model_dir.empty() + !src.tiktoken_file.empty() + !src.tokenizer_json.empty();
  SLUICE_CHECK(given == 1, "give exactly one of --model, --tiktoken, --tokenizer-json");
  if (!src.tiktoken_file.empty()) {
    tokenizer::TiktokenOptions opt;
    opt.pattern = src.pattern == "cl100k_base"   ? tokenizer::TiktokenPattern::cl100k_base
                  : src.pattern == "o200k_base" ? tokenizer::TiktokenPattern::o200k_base
                                                : tokenizer::TiktokenPattern::kimi_k3;
    return tokenizer::load_tiktoken_file(src.tiktoken_file, opt);
  }
  if (!src.tokenizer_json.empty()) return tokenizer::load_tokenizer_json_file(src.tokenizer_json);
  auto tok = tokenizer::load_tokenizer(src.model_dir);
  SLUICE_CHECK(tok != nullptr, src.model_dir, ": no tokenizer files (tiktoken.model or tokenizer.json)");
  return tok;
}

std::string read_stdin() {
  std::ostringstream buf;
  buf << std::cin.rdbuf();
  return buf.str();
}

void read_chat_options(const tokenizer::ChatJson& doc, tokenizer::ChatOptions& opt) {
  using tokenizer::ChatJson;
  opt.tools = doc.value("tools", ChatJson());
  opt.add_generation_prompt = doc.value("add_generation_prompt", true);
  opt.thinking = doc.value("enable_thinking", doc.value("thinking", true));
  opt.thinking_effort = doc.value("thinking_effort", doc.value("reasoning_effort", std::string()));
  opt.tool_choice = doc.value("tool_choice", std::string());
  opt.response_format = doc.value("response_format", ChatJson());
  opt.default_effort_message = doc.value("default_effort_message", true);
  opt.empty_think_in_history = doc.value("empty_think_in_history", true);
  // gpt-oss's template arguments (its reasoning effort is "reasoning_effort" too).
  opt.reasoning_effort = doc.value("reasoning_effort", std::string());
  opt.current_date = doc.value("current_date", std::string());
  if (doc.contains("model_identity")) opt.model_identity = doc["model_identity"].get<std::string>();
  opt.builtin_tools = doc.value("builtin_tools", std::vector<std::string>());
}

// Chat file: an array of messages, or {"messages": [...], "tools", "add_generation_prompt",
// "enable_thinking" | "thinking", "thinking_effort" | "reasoning_effort", "tool_choice", "response_format",
// "current_date", "model_identity", "builtin_tools"}.
tokenizer::RenderedChat render_chat_file(const tokenizer::Tokenizer& tok, const std::string& path,
                                         const std::string& format_name, const std::string& model_dir) {
  using tokenizer::ChatJson;
  bool too_deep = false;
  ChatJson doc = format::parse_json_or_discarded<ChatJson>(tokenizer::read_whole_file(path), &too_deep);
  SLUICE_CHECK(!too_deep, path, ": JSON nested deeper than the limit of ", format::kMaxJsonDepth, " levels");
  SLUICE_CHECK(!doc.is_discarded(), path, ": not valid JSON");
  tokenizer::ChatOptions opt;
  ChatJson messages = doc;
  if (doc.is_object()) {
    SLUICE_CHECK(doc.contains("messages"), path, ": object form needs a 'messages' array");
    messages = doc["messages"];
    try {
      read_chat_options(doc, opt);
    } catch (const nlohmann::json::exception& e) {
      fail(path, ": a chat option has the wrong JSON type: ", e.what());
    }
  }
  std::optional<tokenizer::ChatFormat> format;
  if (format_name == "k3") format = tokenizer::ChatFormat::kimi_k3;
  else if (format_name != "auto") format = tokenizer::chat_format_from_name(format_name);
  else format = tokenizer::detect_chat_format(tok, model_dir.empty() ? "" : tokenizer::read_chat_template(model_dir));
  SLUICE_CHECK(format.has_value(), path, ": no chat format for this tokenizer (", tok.describe(), "); pass --format");
  return tokenizer::render_chat(tok, *format, messages, opt);
}

void print_ids(const std::vector<int32_t>& ids, bool json) {
  std::string line = json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += json ? ", " : " ";
    line += std::to_string(ids[i]);
  }
  line += json ? "]\n" : "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
}

}  // namespace

Action register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of TEXT (or stdin), or of a rendered chat");
  auto src = std::make_shared<TokenizerSource>();
  auto text = std::make_shared<std::string>();
  auto chat = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("auto");
  auto json = std::make_shared<bool>(false);
  auto show_text = std::make_shared<bool>(false);
  add_source_options(cmd, *src);
  cmd->add_option("text", *text, "text to encode as ordinary text (default: stdin)");
  cmd->add_option("--chat", *chat, "render this chat JSON file (messages array or {messages, tools, ...})");
  std::vector<std::string> formats = chat_format_names();
  formats.insert(formats.begin(), {"auto", "k3"});  // k3: kimi_k3's older name
  cmd->add_option("--format", *format, "chat format: auto (from the tokenizer and --model's chat template) or a name")
      ->check(one_of(formats));
  cmd->add_flag("--json", *json, "print ids as a JSON array");
  cmd->add_flag("--rendered", *show_text, "with --chat: print the rendered prompt text instead of ids");
  return [=]() {
    auto tok = open_tokenizer(*src);
    if (!chat->empty()) {
      SLUICE_CHECK(text->empty(), "give either TEXT or --chat, not both");
      tokenizer::RenderedChat r = render_chat_file(*tok, *chat, *format, src->model_dir);
      if (*show_text) std::fwrite(r.text.data(), 1, r.text.size(), stdout);
      else print_ids(r.ids, *json);
      return 0;
    }
    std::string input = text->empty() ? read_stdin() : *text;
    print_ids(tok->encode(input), *json);
    return 0;
  };
}

Action register_detokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("detokenize", "write the bytes of token IDS (or ids read from stdin)");
  auto src = std::make_shared<TokenizerSource>();
  auto ids_text = std::make_shared<std::vector<std::string>>();
  add_source_options(cmd, *src);
  cmd->add_option("ids", *ids_text, "token ids (separated by spaces, commas or brackets)");
  return [=]() {
    auto tok = open_tokenizer(*src);
    std::string all;
    for (const auto& s : *ids_text) all += s + " ";
    if (ids_text->empty()) all = read_stdin();
    std::vector<int32_t> ids;
    std::string number;
    auto flush = [&]() {
      if (number.empty()) return;
      SLUICE_CHECK(number.size() <= 10, "detokenize: id '", number, "' is too large");
      long long v = std::stoll(number);
      SLUICE_CHECK(v <= INT32_MAX, "detokenize: id ", v, " is too large");
      ids.push_back(int32_t(v));
      number.clear();
    };
    for (char c : all) {
      if (c >= '0' && c <= '9') number += c;
      else if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') flush();
      else fail("detokenize: unexpected character '", c, "' in the id list");
    }
    flush();
    std::string bytes = tok->decode(ids);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
  };
}

}  // namespace sluice::cli
