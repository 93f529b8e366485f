// Small facts about JSON values that the request parsers of both APIs word their errors with.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "serve/openai_request.h"

namespace sluice::serve {

// "a string", "an integer", "null"...
inline std::string json_type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// An integer, or a float with an integral value (3.0 is an integer to clients that only have doubles).
inline bool json_is_integer(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
         std::fabs(v.get<double>()) < 9e15;
}

// The value of a json_is_integer value (an unsigned above INT64_MAX wraps, as a seed may).
inline int64_t json_as_int(const Json& v) { return v.is_number_float() ? int64_t(v.get<double>()) : v.get<int64_t>(); }

}  // namespace sluice::serve
