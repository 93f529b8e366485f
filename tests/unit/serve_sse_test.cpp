// SSE framing and stop-sequence matching of the server's streamed responses.
#include <gtest/gtest.h>

#include "serve/sse.h"
#include "serve/stop_matcher.h"

namespace sluice::serve {
namespace {

TEST(ServeSse, OneLinePerEventAndDone) {
  Json j = {{"text", "line one\nline two\r\n"}, {"n", 1}};
  std::string e = sse_event(j);
  ASSERT_EQ(e.rfind("data: ", 0), 0u);
  ASSERT_EQ(e.substr(e.size() - 2), "\n\n");
  // The payload is one line: newlines in strings are escaped by JSON.
  EXPECT_EQ(e.find('\n'), e.size() - 2);
  EXPECT_EQ(Json::parse(e.substr(6)), j);
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(ServeSse, InvalidUtf8IsReplacedNotThrown) {
  Json j = {{"text", std::string("ok \xff\xfe end")}};
  std::string s;
  ASSERT_NO_THROW(s = dump_json(j));
  EXPECT_NE(s.find("\xEF\xBF\xBD"), std::string::npos);
}

std::string run_matcher(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(ServeStop, CutsBeforeStopAcrossPieces) {
  StopMatcher m({"END"});
  std::string out;
  out += m.push("hello E");
  EXPECT_EQ(out, "hello ");  // "E" could start "END": withheld
  out += m.push("N");
  EXPECT_EQ(out, "hello ");
  out += m.push("D and more");
  EXPECT_TRUE(m.hit());
  EXPECT_EQ(out + m.flush(), "hello ");
  EXPECT_EQ(m.push("late"), "");
}

TEST(ServeStop, ReleasesFalseStartsAndEarliestStopWins) {
  StopMatcher a({"END"});
  EXPECT_EQ(run_matcher(a, {"EN", "Dx"}), "");
  StopMatcher b({"END"});
  EXPECT_EQ(run_matcher(b, {"EN", "x", "E"}), "ENxE");
  EXPECT_FALSE(b.hit());
  StopMatcher c({"zz", "b"});
  EXPECT_EQ(run_matcher(c, {"aazzab"}), "aa");
  StopMatcher none({});
  EXPECT_EQ(none.push("abc"), "abc");
  StopMatcher utf({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(run_matcher(utf, {"un \xC3\xA9", "t\xC3\xA9 chaud"}), "un ");
}

}  // namespace
}  // namespace sluice::serve
