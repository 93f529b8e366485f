// libFuzzer target for guided decoding's parsers of untrusted text: a JSON Schema from a request
// (response_format, tool parameters) compiled to GBNF, and GBNF itself (--grammar-file). The input's
// first byte picks the path; the rest is the text. Each may only succeed or throw sluice::Error;
// a schema it accepts must give GBNF that parses, and a grammar that parses must give a matcher
// that steps over the input's bytes without crashing, its mask over a small vocabulary agreeing
// with token-by-token checks.
// fuzz-sources: src/guide/grammar.cpp src/guide/matcher.cpp src/guide/token_mask.cpp src/guide/json_schema.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "guide/json_schema.h"
#include "guide/matcher.h"
#include "guide/token_mask.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Steps a matcher of `g` over `text` and compares the mask with single-token checks at each step.
void exercise(const sluice::guide::Grammar& g, std::string_view text) {
  static const std::vector<std::string> pieces = {"{", "}", "\"", "a", "ab", "1", "-", ".", " ", "\n", ",", ":",
                                                  "[", "]", "true", "null", "\xC3\xA9", "\xC3", "\xA9", ""};
  std::vector<std::string_view> views(pieces.begin(), pieces.end());
  std::vector<bool> special(views.size(), false);
  special.back() = true;
  const sluice::guide::Vocabulary vocab(views, special);
  sluice::guide::Matcher m(std::make_shared<const sluice::guide::Grammar>(g));
  std::vector<uint64_t> bits;
  for (size_t i = 0; i <= std::min<size_t>(text.size(), 64); ++i) {
    vocab.allowed(m, bits);
    for (int32_t t = 0; t < vocab.size(); ++t) check(((bits[size_t(t >> 6)] >> (t & 63)) & 1) == vocab.allows(m, t));
    if (i < text.size() && !m.accept_byte(uint8_t(text[i]))) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  sluice::guide::Grammar g;
  if (data[0] & 1) {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return 0;
    std::string gbnf;
    try {
      gbnf = sluice::guide::json_schema_gbnf(schema);
    } catch (const sluice::Error&) {
      return 0;
    }
    try {
      g = sluice::guide::parse_gbnf(gbnf);
    } catch (const sluice::Error&) {
      std::abort();  // the compiler wrote GBNF its own parser refuses
    }
  } else {
    try {
      g = sluice::guide::parse_gbnf(text);
    } catch (const sluice::Error&) {
      return 0;
    }
  }
  try {
    exercise(g, text);
  } catch (const sluice::Error&) {  // an ambiguous grammar past the matcher's stack bound
  }
  return 0;
}
