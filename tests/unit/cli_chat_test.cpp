// The terminal chat's pieces that need no terminal: lines into messages, model text made safe for
// a terminal, the interruptible line reader (over a pipe), and the /save file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/chat_conversation.h"
#include "cli/terminal.h"
#include "error_of.h"

namespace sluice::cli {
namespace {

TEST(CliMessageAssembler, OneLineIsOneMessage) {
  MessageAssembler m;
  EXPECT_FALSE(m.continuing());
  EXPECT_TRUE(m.push("hello"));
  EXPECT_EQ(m.take(), "hello");
  EXPECT_TRUE(m.push("crlf\r"));  // pasted Windows text
  EXPECT_EQ(m.take(), "crlf");
}

TEST(CliMessageAssembler, TrailingBackslashContinues) {
  MessageAssembler m;
  EXPECT_FALSE(m.push("first \\"));
  EXPECT_TRUE(m.continuing());
  EXPECT_FALSE(m.push("\\"));  // an empty continued line
  EXPECT_TRUE(m.push("last"));
  EXPECT_EQ(m.take(), "first \n\nlast");
  EXPECT_FALSE(m.continuing());
}

TEST(CliMessageAssembler, TripleQuotesMakeABlockThatKeepsBackslashes) {
  MessageAssembler m;
  EXPECT_FALSE(m.push("\"\"\""));
  EXPECT_TRUE(m.continuing());
  EXPECT_FALSE(m.push(""));
  EXPECT_FALSE(m.push("C:\\dir\\"));
  EXPECT_FALSE(m.push("  \"\"\" inside a line"));
  EXPECT_TRUE(m.push("\"\"\""));
  EXPECT_EQ(m.take(), "\nC:\\dir\\\n  \"\"\" inside a line");
  // """ in the middle of a continued message is text.
  EXPECT_FALSE(m.push("a\\"));
  EXPECT_TRUE(m.push("\"\"\""));
  EXPECT_EQ(m.take(), "a\n\"\"\"");
}

TEST(CliMessageAssembler, ClearDropsAHalfTypedMessage) {
  MessageAssembler m;
  m.push("\"\"\"");
  m.push("pasted");
  m.clear();
  EXPECT_FALSE(m.continuing());
  EXPECT_TRUE(m.push("next"));
  EXPECT_EQ(m.take(), "next");
}

TEST(CliTerminalSafe, ControlCharactersAreShownNotObeyed) {
  EXPECT_EQ(terminal_safe("plain text\n\ttabbed"), "plain text\n\ttabbed");
  EXPECT_EQ(terminal_safe("\x1b]0;title\x07"), "^[]0;title^G");
  EXPECT_EQ(terminal_safe("over\rwrite\x7f"), "over^Mwrite^?");
  EXPECT_EQ(terminal_safe("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // multi-byte kept
  EXPECT_EQ(terminal_safe("csi \xc2\x9b" "2J"), "csi \xef\xbf\xbd" "2J");          // C1 control
  EXPECT_EQ(terminal_safe("bad \xff byte"), "bad \xef\xbf\xbd byte");
  EXPECT_EQ(terminal_safe("nbsp\xc2\xa0"), "nbsp\xc2\xa0");  // U+00A0 is not a control
}

TEST(CliLineReader, LinesEndOfInputAndInterruption) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string input = "one\ntwo\r\nthree";
  ASSERT_EQ(::write(fds[1], input.data(), input.size()), ssize_t(input.size()));
  LineReader reader(fds[0]);
  std::atomic<bool> flag{false};
  std::string line;
  ASSERT_EQ(reader.read_line(line, flag), LineReader::Status::line);
  EXPECT_EQ(line, "one");
  ASSERT_EQ(reader.read_line(line, flag), LineReader::Status::line);
  EXPECT_EQ(line, "two\r");  // the assembler drops the \r
  // Nothing more arrives: the flag (a signal handler's) ends the wait.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    flag = true;
  });
  EXPECT_EQ(reader.read_line(line, flag), LineReader::Status::interrupted);
  later.join();
  flag = false;
  ::close(fds[1]);
  // The interruption dropped the partial "three" (as a terminal drops its line on Ctrl-C).
  EXPECT_EQ(reader.read_line(line, flag), LineReader::Status::eof);
  ::close(fds[0]);

  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "last", 4), 4);
  ::close(fds[1]);
  LineReader tail(fds[0]);
  ASSERT_EQ(tail.read_line(line, flag), LineReader::Status::line);
  EXPECT_EQ(line, "last");
  EXPECT_EQ(tail.read_line(line, flag), LineReader::Status::eof);
  ::close(fds[0]);
}

// On a terminal (a pseudo-terminal here) lines are edited by the reader: backspace takes a whole
// UTF-8 character, Ctrl-U the line, Ctrl-W a word; Up and Down walk the lines entered before and
// back to the one being typed; Ctrl-D on an empty line ends the input. What was typed is echoed to
// `out`; the terminal is back in canonical mode with echo after each line.
TEST(CliLineReader, EditsLinesWithHistoryOnATerminal) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int tty = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(tty, 0);
  int echo_pipe[2];
  ASSERT_EQ(::pipe(echo_pipe), 0);
  ASSERT_EQ(::fcntl(echo_pipe[0], F_SETFL, O_NONBLOCK), 0);
  LineReader reader(tty, echo_pipe[1]);
  std::atomic<bool> flag{false};
  std::string line;
  auto canonical = [&] {
    termios t{};
    EXPECT_EQ(::tcgetattr(tty, &t), 0);
    return (t.c_lflag & ICANON) && (t.c_lflag & ECHO);
  };
  // Keys are typed once the reader has the terminal out of canonical mode (typed before, the
  // kernel's own line editing would take them); the terminal is canonical again afterwards.
  auto edit = [&](const std::string& keys, LineReader::Status want = LineReader::Status::line) {
    auto result = std::async(std::launch::async, [&] { return reader.read_line(line, flag, "> "); });
    for (int i = 0; i < 5000 && canonical(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_FALSE(canonical()) << "the reader did not leave canonical mode";
    if (!keys.empty()) {
      EXPECT_EQ(::write(master, keys.data(), keys.size()), ssize_t(keys.size()));
    }
    if (want == LineReader::Status::interrupted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      flag = true;
    }
    EXPECT_EQ(result.get(), want) << keys;
    EXPECT_TRUE(canonical()) << "canonical mode and echo restored";
    flag = false;
    return line;
  };
  EXPECT_EQ(edit("abc\x7f" "d\r"), "abd");
  EXPECT_EQ(edit("h\xc3\xa9llo\x7f\x7f\x7f\r"), "h\xc3\xa9");  // three backspaces: o, l, l
  EXPECT_EQ(edit("h\xc3\xa9\x7f\n"), "h");                         // one takes the two bytes of é
  EXPECT_EQ(edit("\x1b[A\x1b[A\r"), "h\xc3\xa9");                 // Up twice: the line before the last
  EXPECT_EQ(edit("draft\x1b[A\x1b[A\x1b[B\x1b[B\r"), "draft");     // into the history and back to the draft
  EXPECT_EQ(edit("\x1bOA\r"), "draft");  // Up in application cursor mode: the last line again
  // Every line entered, a recalled one again, but not the line before repeated ("draft" twice).
  EXPECT_EQ(reader.history(), (std::vector<std::string>{"abd", "h\xc3\xa9", "h", "h\xc3\xa9", "draft"}));
  EXPECT_EQ(edit("two words\x17\x17one\x15zz\x1b[C\r"), "zz");  // Ctrl-W twice, Ctrl-U, Right ignored
  EXPECT_EQ(edit("pasted\nlines\n"), "pasted");                    // one read, two lines
  EXPECT_EQ(reader.read_line(line, flag, "> "), LineReader::Status::line);
  EXPECT_EQ(line, "lines");
  char echoed[4096];
  const ssize_t n = ::read(echo_pipe[0], echoed, sizeof echoed);
  ASSERT_GT(n, 0);
  const std::string shown(echoed, size_t(n));
  EXPECT_NE(shown.find("abc\b \bd\n"), std::string::npos) << shown;  // a one-column backspace erases in place
  EXPECT_NE(shown.find("\r\x1b[K> h\xc3\xa9"), std::string::npos) << shown;  // a recalled line is redrawn
  // Ctrl-D with text does nothing; on an empty line it ends the input.
  edit("x\x04\x7f\x04", LineReader::Status::eof);
  // A half-typed line and the flag (Ctrl-C's handler): interrupted, the line dropped.
  edit("half", LineReader::Status::interrupted);
  EXPECT_EQ(edit("whole\r"), "whole");
  ::close(tty);
  ::close(master);
  ::close(echo_pipe[0]);
  ::close(echo_pipe[1]);
}

TEST(CliConversation, MessagesAndSave) {
  Conversation c("Be brief.");
  c.add_user("hi");
  c.add_assistant("hello", "the user greets");
  c.add_user("cut \xe2\x9c");  // a reply or paste cut inside a character
  c.add_assistant("", "");
  tokenizer::ChatJson m = c.messages();
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["reasoning_content"], "the user greets");
  EXPECT_FALSE(m[4].contains("reasoning_content"));
  c.drop_last();
  EXPECT_EQ(c.size(), 3u);

  const auto dir = std::filesystem::temp_directory_path() / ("sluice_chat_save_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "chat.json").string();
  c.save(path, "target");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json saved = nlohmann::json::parse(text.str());
  EXPECT_EQ(saved["model"], "target");
  ASSERT_EQ(saved["messages"].size(), 4u);
  EXPECT_EQ(saved["messages"][3]["content"], "cut \xef\xbf\xbd");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left
  c.set_system("");
  c.clear();
  EXPECT_EQ(c.messages().size(), 0u);
  EXPECT_NE(testing::expect_error_of([&] { c.save((dir / "missing" / "chat.json").string(), "target"); }), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::cli
