// Parsing of values given on the command line: integer lists ("1,2,3", "[1, 2, 3]", space
// separated) and the strict validators every numeric or enumerated option uses. CLI11's own
// conversion reads "010" as octal, "0x10" as hex and takes "inf" or "nan" as numbers; these
// accept plain decimal inside a range only and turn anything else into a usage error (exit 2)
// that names the option and the value.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::cli {

// Integers >= min separated by commas, spaces or newlines (brackets ignored); names `what` in errors.
std::vector<int64_t> parse_int_list(const std::string& text, const char* what, int64_t min, bool allow_empty = false);

// Use with ->transform(): each rewrites the value to its canonical decimal form, so that CLI11's
// conversion afterwards reads exactly the number that was checked.
CLI::Validator integer_in(int64_t min, int64_t max);
CLI::Validator number_in(double min, double max);
// "auto", or a number in min..max (rewritten as number_in does).
CLI::Validator auto_or_number_in(double min, double max);
// (0, max]: a budget, a time, a probability.
CLI::Validator positive_number(double max);
// PATH[:CAPACITY] of a home (store::parse_home_spec's rules).
CLI::Validator home_spec();

// Use with ->check(): the value must be one of `values`.
CLI::Validator one_of(std::vector<std::string> values);

// --chat-format: the chat format names (tokenizer::chat_format_name), and the option's help.
std::vector<std::string> chat_format_names();
extern const char* const kChatFormatHelp;

}  // namespace sluice::cli
