// Terminal plumbing: styles, an interruptible line reader, message assembly, safe model text.
#include "cli/terminal.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
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

LineReader::Status LineReader::read_line(std::string& line, const std::atomic<bool>& flag, std::string_view prompt) {
  termios cooked{};
  if (!::isatty(fd_) || ::tcgetattr(fd_, &cooked) != 0) return read_cooked(line, flag);
  termios raw = cooked;
  raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(fd_, TCSANOW, &raw) != 0) return read_cooked(line, flag);
  // Canonical mode again on every way out: a reply (and a crash after it) sees the usual terminal.
  struct Restore {
    int fd;
    const termios& t;
    ~Restore() { ::tcsetattr(fd, TCSANOW, &t); }
  } restore{fd_, cooked};
  return read_edited(line, flag, prompt);
}

bool LineReader::fill(const std::atomic<bool>& flag) {
  while (!flag.load()) {
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
    if (n == 0) return false;  // Ctrl-D on an empty canonical line, or the end of piped input
    pending_.append(buf, size_t(n));
    return true;
  }
  return true;
}

void LineReader::echo(std::string_view s) const {
  while (!s.empty()) {
    const ssize_t n = ::write(out_, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone; reading will say so
    s.remove_prefix(size_t(n));
  }
}

LineReader::Status LineReader::read_cooked(std::string& line, const std::atomic<bool>& flag) {
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
    if (!fill(flag)) eof_ = true;
  }
}

LineReader::Status LineReader::read_edited(std::string& line, const std::atomic<bool>& flag,
                                           std::string_view prompt) {
  std::string buf, draft;
  size_t recalled = history_.size();  // == size: the line being typed (kept in draft when Up leaves it)
  auto redraw = [&] {
    std::string s = "\r\x1b[K";
    s.append(prompt);
    s += terminal_safe(buf);
    echo(s);
  };
  auto recall = [&](size_t at) {
    if (recalled == history_.size()) draft = buf;
    recalled = at;
    buf = at == history_.size() ? draft : history_[at];
    redraw();
  };
  size_t i = 0;  // the next byte of pending_ to take
  for (;; ++i) {
    if (flag.load()) {
      pending_.clear();
      echo("^C");  // as the terminal echoes it in canonical mode; the caller ends the line
      return Status::interrupted;
    }
    if (i >= pending_.size()) {
      pending_.clear();
      if (eof_ || !fill(flag)) {
        eof_ = true;
        if (buf.empty()) return Status::eof;
        echo("\n");
        line.swap(buf);
        return Status::line;
      }
      i = size_t(-1);  // the loop's ++i starts the new input at its first byte
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(pending_[i]);
    if (c == '\n' || c == '\r') {
      pending_.erase(0, i + 1);
      echo("\n");
      if (!buf.empty() && (history_.empty() || history_.back() != buf)) history_.push_back(buf);
      line.swap(buf);
      return Status::line;
    }
    if (c == 0x04) {  // Ctrl-D: the end of input on an empty line, else nothing
      if (buf.empty()) {
        pending_.erase(0, i + 1);
        return Status::eof;
      }
    } else if (c == 0x7f || c == 0x08) {  // backspace: one UTF-8 character
      if (!buf.empty()) {
        size_t cut = buf.size() - 1;
        while (cut > 0 && (static_cast<unsigned char>(buf[cut]) & 0xc0) == 0x80) --cut;
        const bool one_column = buf.size() - cut == 1 && static_cast<unsigned char>(buf[cut]) >= 0x20;
        buf.erase(cut);
        if (one_column) echo("\b \b");
        else redraw();
      }
    } else if (c == 0x15) {  // Ctrl-U: the whole line
      buf.clear();
      redraw();
    } else if (c == 0x17) {  // Ctrl-W: back over spaces, then over a word
      size_t cut = buf.size();
      while (cut > 0 && buf[cut - 1] == ' ') --cut;
      while (cut > 0 && buf[cut - 1] != ' ') --cut;
      buf.erase(cut);
      redraw();
    } else if (c == 0x1b) {  // an escape sequence: ESC [ or ESC O, parameters, a final byte
      // Wait for the whole sequence (a terminal sends it in one write; a lone ESC waits for more).
      while (pending_.size() < i + 3 && !eof_ && !flag.load()) {
        if (!fill(flag)) eof_ = true;
      }
      size_t j = i + 1;
      if (j < pending_.size() && (pending_[j] == '[' || pending_[j] == 'O')) {
        ++j;
        while (j < pending_.size() && static_cast<unsigned char>(pending_[j]) >= 0x20 &&
               static_cast<unsigned char>(pending_[j]) < 0x40)
          ++j;  // parameter and intermediate bytes
        if (j < pending_.size()) {
          if (pending_[j] == 'A' && recalled > 0) recall(recalled - 1);
          if (pending_[j] == 'B' && recalled < history_.size()) recall(recalled + 1);
          // Other keys (Left, Right, Home, Delete...) are not line edits here: ignored.
        }
      }
      i = std::min(j, pending_.size() - 1);
    } else if (c >= 0x20 || c == '\t') {
      // Text, a UTF-8 sequence's bytes included; echoed as typed once the sequence is whole.
      buf.push_back(char(c));
      size_t start = buf.size() - 1;
      while (start > 0 && (static_cast<unsigned char>(buf[start]) & 0xc0) == 0x80) --start;
      const unsigned char lead = static_cast<unsigned char>(buf[start]);
      const size_t want = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
      if (buf.size() - start >= want) echo(terminal_safe(std::string_view(buf).substr(start)));
    }
    // Other control characters are ignored.
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
