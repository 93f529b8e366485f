// Strings joined with a separator ("a, b, c"), for the lists that errors and help texts name.
#pragma once
#include <string>
#include <string_view>

namespace sluice {

template <typename Range>
std::string join(const Range& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

}  // namespace sluice
