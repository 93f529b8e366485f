// Parsing of integer lists given on the command line ("1,2,3", "[1, 2, 3]", space separated).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::cli {

// Integers >= min separated by commas, spaces or newlines (brackets ignored); names `what` in errors.
std::vector<int64_t> parse_int_list(const std::string& text, const char* what, int64_t min, bool allow_empty = false);

}  // namespace sluice::cli
