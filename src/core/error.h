// Errors: one exception type carrying a message that names what was wrong (file, field, offset),
// and a variadic helper that builds such messages without <format> (g++ 12 lacks it).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sluice {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(cat(std::forward<Parts>(parts)...));
}

#define SLUICE_CHECK(cond, ...)      \
  do {                               \
    if (!(cond)) ::sluice::fail(__VA_ARGS__); \
  } while (0)

}  // namespace sluice
