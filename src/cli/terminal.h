// Terminal plumbing for the interactive chat, with no line-editing library: whether a stream may
// carry ANSI styles, a line reader that a signal can interrupt while it waits, the rule that joins
// typed lines into one message, and the escaping of model text shown on a terminal.
#pragma once
#include <atomic>
#include <string>
#include <string_view>

namespace sluice::cli {

// ANSI styles on `fd`: it is a terminal and NO_COLOR is unset or empty (https://no-color.org).
bool styles_allowed(int fd);

// Reads lines from a file descriptor (the terminal in canonical mode: the kernel's own line
// editing, erase and kill keys). Waits in poll() so that a signal handler's flag is seen within a
// fraction of a second, whichever thread the signal landed on.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  enum class Status { line, eof, interrupted };
  // One line without its newline (a final line without one counts too); `interrupted` as soon as
  // *flag reads true (the partial line is dropped, as the terminal drops it on Ctrl-C).
  Status read_line(std::string& line, const std::atomic<bool>& flag);

 private:
  int fd_;
  std::string pending_;
  bool eof_ = false;
};

// Lines into messages: a line ending in a backslash continues on the next (the backslash becomes
// a newline); a line that is exactly """ opens a block that the next such line closes, for pasting
// text whose lines may end in backslashes. Everything else is a message of one line.
class MessageAssembler {
 public:
  // Adds one line; true when a message is complete (take() it).
  bool push(std::string_view line);
  // A message is under way (the prompt shows "...").
  bool continuing() const { return block_ || !text_.empty(); }
  std::string take();
  void clear();

 private:
  std::string text_;
  bool block_ = false, block_has_line_ = false;
};

// Model text made safe for a terminal: control characters other than newline and tab (an escape
// sequence could move the cursor, retitle the window or rewrite the screen) are shown in caret
// notation (^[, ^M); invalid UTF-8 becomes U+FFFD.
std::string terminal_safe(std::string_view text);

}  // namespace sluice::cli
