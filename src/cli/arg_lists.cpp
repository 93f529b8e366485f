// Command-line integer lists and the strict option validators.
#include "cli/arg_lists.h"

#include <climits>
#include <cstdio>
#include <stdexcept>

#include "core/error.h"
#include "core/join.h"
#include "core/parse_number.h"
#include "store/prepare.h"
#include "tokenizer/chat.h"

namespace sluice::cli {

std::vector<int64_t> parse_int_list(const std::string& text, const char* what, int64_t min, bool allow_empty) {
  std::vector<int64_t> out;
  std::string item;
  for (size_t i = 0; i <= text.size(); ++i) {
    char ch = i < text.size() ? text[i] : ',';
    if (ch == ',' || ch == ' ' || ch == '\n' || ch == '\t' || ch == '[' || ch == ']') {
      if (item.empty()) continue;
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || v < min || v > INT32_MAX)
        fail(what, ": '", item, "' is not an integer >= ", min);
      out.push_back(v);
      item.clear();
    } else {
      item += ch;
    }
  }
  if (out.empty() && !allow_empty) fail(what, " is empty");
  return out;
}

namespace {

// A modifying validator: `check` returns the canonical text of a good value or throws Error.
CLI::Validator canonical(std::string description, std::function<std::string(const std::string&)> check) {
  return CLI::Validator(
      [check](std::string& value) -> std::string {
        try {
          value = check(value);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      std::move(description));
}

std::string decimal_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

CLI::Validator integer_in(int64_t min, int64_t max) {
  return canonical(cat("INT in ", min, "..", max),
                   [=](const std::string& t) { return std::to_string(parse_integer(t, "", min, max)); });
}

CLI::Validator number_in(double min, double max) {
  return canonical(cat("NUMBER in ", min, "..", max),
                   [=](const std::string& t) { return decimal_text(parse_decimal(t, "", min, max)); });
}

CLI::Validator auto_or_number_in(double min, double max) {
  return canonical(cat("auto or NUMBER in ", min, "..", max), [=](const std::string& t) {
    return t == "auto" ? t : decimal_text(parse_decimal(t, "", min, max));
  });
}

CLI::Validator positive_number(double max) {
  return canonical(cat("NUMBER in (0, ", max, "]"), [=](const std::string& t) {
    double v = parse_decimal(t, "", 0, max);
    if (!(v > 0)) fail(t, " is not positive");
    return decimal_text(v);
  });
}

CLI::Validator home_spec() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          store::parse_home_spec(value);
          return {};
        } catch (const Error& e) {
          // CLI11 names the option itself: drop parse_home_spec's own "--home " prefix.
          std::string why = e.what();
          return why.rfind("--home ", 0) == 0 ? why.substr(7) : why;
        }
      },
      "PATH[:CAPACITY]");
}

CLI::Validator one_of(std::vector<std::string> values) {
  const std::string list = join(values, ", ");
  return CLI::Validator(
      [values, list](std::string& value) -> std::string {
        for (const auto& v : values)
          if (value == v) return {};
        return cat("'", value, "' is not one of ", list);
      },
      "one of " + list);
}

std::vector<std::string> chat_format_names() {
  using tokenizer::ChatFormat;
  std::vector<std::string> names;
  for (ChatFormat f : {ChatFormat::kimi_k3, ChatFormat::qwen3, ChatFormat::deepseek_v3, ChatFormat::deepseek_v3_0324,
                       ChatFormat::kimi_k2, ChatFormat::kimi_k2_thinking, ChatFormat::gpt_oss})
    names.push_back(tokenizer::chat_format_name(f));
  return names;
}

const char* const kChatFormatHelp =
    "Chat format (default: from the tokenizer's special tokens and the model's chat template): kimi_k3, qwen3, "
    "deepseek_v3 (first release), deepseek_v3_0324, kimi_k2, kimi_k2_thinking, gpt_oss";

}  // namespace sluice::cli
