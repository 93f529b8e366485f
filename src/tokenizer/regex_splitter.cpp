// PCRE2 wrapper for pre-tokenisation (see regex_splitter.h). One compiled, JIT-ed pattern per
// splitter; match data is per thread so that const encode() calls may run concurrently.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_splitter.h"

#include <pcre2.h>

#include <mutex>
#include <vector>

#include "core/error.h"

namespace sluice::tokenizer {
namespace {

// Unicode White_Space, the meaning of \s in Rust's regex crate and in Oniguruma.
constexpr const char* kWhiteSpaceClassBody =
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Per-thread match state; the JIT stack may grow to 64 MiB so long pieces never hit its limit.
struct MatchData {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchData() {
    data = pcre2_match_data_create(4, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchData() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string what;
  ~Impl() { pcre2_code_free(code); }
};

std::string RegexSplitter::translate(const std::string& pattern, const std::string& what) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char d = pattern[i + 1];
      if (d == 's') {
        out += in_class ? std::string(kWhiteSpaceClassBody) : cat("[", kWhiteSpaceClassBody, "]");
      } else if (d == 'S') {
        if (in_class) fail(what, ": \\S inside a character class is not supported in pattern ", pattern);
        out += cat("[^", kWhiteSpaceClassBody, "]");
      } else {
        out += c;
        out += d;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      size_t close = pattern.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& what) : impl_(std::make_unique<Impl>()) {
  impl_->what = what;
  std::string translated = translate(pattern, what);
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    fail(what, ": cannot compile pre-tokenizer regex at offset ", offset, ": ", reinterpret_cast<char*>(message),
         " (pattern ", pattern, ")");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;

size_t RegexSplitter::next_char(std::string_view text, size_t pos) {
  ++pos;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

bool RegexSplitter::next_match(std::string_view text, size_t from, size_t& begin, size_t& end) const {
  thread_local MatchData md;
  SLUICE_CHECK(md.data && md.context, impl_->what, ": out of memory for regex match data");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), from, 0, md.data, md.context)
                      : pcre2_match(impl_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, md.data, md.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    fail(impl_->what, ": regex match failed at byte ", from, ": ", reinterpret_cast<char*>(message));
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace sluice::tokenizer
