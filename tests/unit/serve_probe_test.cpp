// The connection probe on real loopback TCP sockets: a client that closes is seen as gone, and a
// client that half-closed (shutdown(SHUT_WR)) along with its request is still waiting for its answer;
// with an interim response allowed, a close right after the request is told from a half-close.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "serve/connection_probe.h"

namespace sluice::serve {
namespace {

// One accepted loopback connection: `client` and `server` ends, and the probe for the server end.
struct Connection {
  int client = -1, server = -1;
  int local_port = 0, remote_port = 0;
  Connection() {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    local_port = ntohs(a.sin_port);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    server = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    ::getsockname(client, reinterpret_cast<sockaddr*>(&a), &len);
    remote_port = ntohs(a.sin_port);
  }
  ~Connection() {
    if (client >= 0) ::close(client);
    ::close(server);
  }
  ConnectionProbe probe(bool interim_ok = false) const {
    return ConnectionProbe("127.0.0.1", local_port, "127.0.0.1", remote_port, interim_ok);
  }
  // What the client has received so far, without waiting.
  std::string received() const {
    char buf[256];
    ssize_t n = ::recv(client, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
  }
  void settle() const { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
};

TEST(ServeProbe, ClientThatClosesIsGone) {
  Connection c;
  ConnectionProbe p = c.probe();
  ASSERT_FALSE(p.inert());
  EXPECT_FALSE(p.closed());
  // An end of stream right after the request is a half-close; one later is a departure.
  std::this_thread::sleep_for(ConnectionProbe::kHalfCloseGrace);
  EXPECT_FALSE(p.closed());
  ::close(c.client);
  c.client = -1;
  c.settle();
  EXPECT_TRUE(p.closed());
}

TEST(ServeProbe, HalfCloseTrailingTheRequestIsStillWaiting) {
  Connection c;
  ConnectionProbe p = c.probe();
  EXPECT_FALSE(p.half_closed());
  c.settle();
  ::shutdown(c.client, SHUT_WR);  // a client a little slower to half-close than to send
  c.settle();
  EXPECT_FALSE(p.closed());
  EXPECT_TRUE(p.half_closed());
}

TEST(ServeProbe, HalfClosedClientIsStillWaiting) {
  Connection c;
  ASSERT_EQ(::send(c.client, "GET / HTTP/1.1\r\n\r\n", 18, 0), 18);
  ::shutdown(c.client, SHUT_WR);  // done sending; waiting for the response
  c.settle();
  char buf[64];
  ASSERT_EQ(::recv(c.server, buf, sizeof buf, 0), 18);  // the server read the request
  ConnectionProbe p = c.probe();
  ASSERT_FALSE(p.inert());
  EXPECT_TRUE(p.half_closed());
  EXPECT_FALSE(p.closed());
  // Once it really goes away, the next write meets a reset and the probe says so.
  ::close(c.client);
  c.client = -1;
  c.settle();
  EXPECT_FALSE(p.closed());
  ::send(c.server, "x", 1, MSG_NOSIGNAL);
  c.settle();
  EXPECT_TRUE(p.closed());
}

constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

// A client that sends its request and closes at once looks like a half-close until something is
// written to it: the probe's 100 Continue meets a reset, and the client is gone.
TEST(ServeProbe, ClientThatClosesRightAfterItsRequestIsGoneOnceAsked) {
  Connection c;
  ASSERT_EQ(::send(c.client, "GET / HTTP/1.1\r\n\r\n", 18, 0), 18);
  ::close(c.client);
  c.client = -1;
  c.settle();
  char buf[64];
  ASSERT_EQ(::recv(c.server, buf, sizeof buf, 0), 18);
  ConnectionProbe p = c.probe(true);
  ASSERT_FALSE(p.inert());
  bool gone = p.closed();
  if (!gone) {  // the reset may come a moment later
    c.settle();
    gone = p.closed();
  }
  EXPECT_TRUE(gone);
  // Without an interim response the same close reads as a half-close (the grace window).
  Connection d;
  ASSERT_EQ(::send(d.client, "GET / HTTP/1.1\r\n\r\n", 18, 0), 18);
  ::close(d.client);
  d.client = -1;
  d.settle();
  ASSERT_EQ(::recv(d.server, buf, sizeof buf, 0), 18);
  ConnectionProbe q = d.probe(false);
  EXPECT_FALSE(q.closed());
}

// A half-closed client gets one 100 Continue, no reset comes back, and it stays a waiting client.
TEST(ServeProbe, HalfClosedClientGetsOneContinueAndIsStillWaiting) {
  Connection c;
  ASSERT_EQ(::send(c.client, "GET / HTTP/1.1\r\n\r\n", 18, 0), 18);
  ::shutdown(c.client, SHUT_WR);
  c.settle();
  char buf[64];
  ASSERT_EQ(::recv(c.server, buf, sizeof buf, 0), 18);
  ConnectionProbe p = c.probe(true);
  EXPECT_FALSE(p.closed());
  c.settle();
  EXPECT_FALSE(p.closed());
  EXPECT_TRUE(p.half_closed());
  EXPECT_EQ(c.received(), kContinue);
  EXPECT_FALSE(p.closed());
  EXPECT_EQ(c.received(), "") << "the interim response is sent once";
}

// Once the response has begun, nothing more is written by the probe.
TEST(ServeProbe, NoInterimResponseOnceTheResponseStarted) {
  Connection c;
  ConnectionProbe p = c.probe(true);
  p.response_started();
  ::shutdown(c.client, SHUT_WR);
  c.settle();
  EXPECT_FALSE(p.closed());
  EXPECT_TRUE(p.half_closed());
  EXPECT_EQ(c.received(), "");
}

}  // namespace
}  // namespace sluice::serve
