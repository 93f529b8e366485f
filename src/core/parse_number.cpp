// Strict decimal parsing for values people type.
#include "core/parse_number.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace sluice {
namespace {

// True when text is an optional '-', then digits with at most one '.' among them (allow_point).
bool plain_decimal(const std::string& text, bool allow_point) {
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  bool digit = false, point = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '.' && allow_point && !point) {
      point = true;
    } else {
      return false;
    }
  }
  return digit;
}

// "what: " when what is given (the CLI prefixes the option name itself).
std::string prefix(const std::string& what) { return what.empty() ? std::string() : what + ": "; }

}  // namespace

int64_t parse_integer(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  if (!plain_decimal(text, false)) fail(prefix(what), "'", text, "' is not a decimal integer");
  errno = 0;
  long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max) fail(prefix(what), text, " is outside ", min, "..", max);
  return v;
}

double parse_decimal(const std::string& text, const std::string& what, double min, double max) {
  if (!plain_decimal(text, true)) fail(prefix(what), "'", text, "' is not a decimal number");
  double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v) || v < min || v > max) fail(prefix(what), text, " is outside ", min, "..", max);
  return v;
}

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  std::string number = text;
  double unit = 1;
  if (!number.empty()) {
    switch (number.back()) {
      case 'K': case 'k': unit = 1e3; break;
      case 'M': unit = 1e6; break;
      case 'G': unit = 1e9; break;
      case 'T': unit = 1e12; break;
      default: break;
    }
    if (unit != 1) number.pop_back();
  }
  if (!plain_decimal(number, true) || number[0] == '-')
    fail(prefix(what), "'", text, "' is not a size (a number with an optional K, M, G or T suffix)");
  const double bytes = std::strtod(number.c_str(), nullptr) * unit;
  if (!(bytes >= 1) || bytes > double(uint64_t(1) << 62))
    fail(prefix(what), text, " is not a size between 1 byte and 4.6E (2^62 bytes)");
  return uint64_t(bytes);
}

}  // namespace sluice
