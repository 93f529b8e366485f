// Strict parsing of numbers typed by people (command-line values, "PATH:CAPACITY" specs): plain
// decimal only, so "010", "0x10", "1e3", "inf", "nan", "12abc" and out-of-range values are refused
// by name instead of being read as something the user did not mean.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

// An optional '-' then decimal digits, inside [min, max]; throws Error "<what>: <why>" naming the
// text (just "<why>" when what is empty).
int64_t parse_integer(const std::string& text, const std::string& what, int64_t min, int64_t max);
// An optional '-', digits and at most one '.', inside [min, max] (finite by construction).
double parse_decimal(const std::string& text, const std::string& what, double min, double max);
// A byte count: a decimal number with an optional K, M, G or T suffix (powers of 1000), at least
// one byte and at most 2^62 bytes.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace sluice
