// Terminal plumbing for the interactive chat, with no line-editing library: whether a stream may
// carry ANSI styles, a line reader that a signal can interrupt while it waits, the rule that joins
// typed lines into one message, and the escaping of model text shown on a terminal.
#pragma once
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

// ANSI styles on `fd`: it is a terminal and NO_COLOR is unset or empty (https://no-color.org).
bool styles_allowed(int fd);

// Reads lines from a file descriptor. Waits in poll() so that a signal handler's flag is seen
// within a fraction of a second, whichever thread the signal landed on. On a terminal each line is
// edited here, with the terminal out of canonical mode (and without echo) only while a line is
// read: backspace (a whole UTF-8 character), Ctrl-U (the line), Ctrl-W (a word), Up and Down (the
// lines entered before, newest first; Down past the newest gives back the line being typed),
// Ctrl-D on an empty line (end of input); Ctrl-C still raises SIGINT (ISIG stays on). Elsewhere
// (pipes, files) lines are read as they come.
class LineReader {
 public:
  // `out`: where a terminal line's echo goes (the chat's stdout).
  explicit LineReader(int fd, int out = 1) : fd_(fd), out_(out) {}
  enum class Status { line, eof, interrupted };
  // One line without its newline (a final line without one counts too); `interrupted` as soon as
  // *flag reads true (the partial line is dropped). `prompt`: what the caller printed before the
  // line, for redrawing it on a terminal.
  Status read_line(std::string& line, const std::atomic<bool>& flag, std::string_view prompt = {});
  // The lines entered on the terminal so far, oldest first (empty lines, and a line equal to the
  // one before it, left out).
  const std::vector<std::string>& history() const { return history_; }

 private:
  Status read_cooked(std::string& line, const std::atomic<bool>& flag);
  Status read_edited(std::string& line, const std::atomic<bool>& flag, std::string_view prompt);
  // Waits for input and appends it to pending_; false at end of input.
  bool fill(const std::atomic<bool>& flag);
  void echo(std::string_view s) const;
  int fd_, out_;
  std::string pending_;
  bool eof_ = false;
  std::vector<std::string> history_;
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
