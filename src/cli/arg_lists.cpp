// Command-line integer lists.
#include "cli/arg_lists.h"

#include <climits>
#include <stdexcept>

#include "core/error.h"

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

}  // namespace sluice::cli
