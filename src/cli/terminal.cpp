// Terminal plumbing: styles, an interruptible line reader, message assembly, safe model text.
#include "cli/terminal.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace sluice::cli {

bool styles_allowed(int fd) {
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(fd) && !(no_color && *no_color);
}

LineReader::Status LineReader::read_line(std::string& line, const std::atomic<bool>& flag) {
  for (;;) {
    if (flag.load()) {
      pending_.clear();
      return Status::interrupted;
    }
    if (size_t nl = pending_.find('\n'); nl != std::string::npos) {
      line.assign(pending_, 0, nl);
      pending_.erase(0, nl + 1);
      return Status::line;
    }
    if (eof_) {
      if (pending_.empty()) return Status::eof;
      line.swap(pending_);
      pending_.clear();
      return Status::line;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (ready < 0 && errno != EINTR) fail("reading the terminal: ", std::strerror(errno));
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail("reading the terminal: ", std::strerror(errno));
    }
    if (n == 0)
      eof_ = true;  // Ctrl-D on an empty line, or the end of piped input
    else
      pending_.append(buf, size_t(n));
  }
}

bool MessageAssembler::push(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // pasted CRLF text
  if (block_) {
    if (line == "\"\"\"") {
      block_ = false;
      return true;
    }
    if (block_has_line_) text_ += '\n';
    text_ += line;
    block_has_line_ = true;
    return false;
  }
  if (text_.empty() && line == "\"\"\"") {
    block_ = true;
    block_has_line_ = false;
    return false;
  }
  if (!line.empty() && line.back() == '\\') {
    text_.append(line.substr(0, line.size() - 1));
    text_ += '\n';
    return false;
  }
  text_ += line;
  return true;
}

std::string MessageAssembler::take() {
  std::string out;
  out.swap(text_);
  block_ = false;
  return out;
}

void MessageAssembler::clear() {
  text_.clear();
  block_ = false;
}

std::string terminal_safe(std::string_view text) {
  const std::string valid = tokenizer::utf8_replace_invalid(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size();) {
    const auto c = static_cast<unsigned char>(valid[i]);
    if (c < 0x20 && c != '\n' && c != '\t') {
      out += '^';
      out += char(c + 0x40);
      ++i;
    } else if (c == 0x7f) {
      out += "^?";
      ++i;
    } else if (c == 0xc2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) < 0xa0) {
      out += "\xef\xbf\xbd";  // a C1 control (U+0080..U+009F): some terminals act on these too
      i += 2;
    } else {
      out += valid[i];
      ++i;
    }
  }
  return out;
}

}  // namespace sluice::cli
