// Tells whether an HTTP client is still connected. cpp-httplib 0.11 (Debian 12) hands handlers no
// socket and no "connection closed" query, so the probe finds the connection's socket by its
// address pair (local and remote address and port, which the request does carry) among this
// process's descriptors, then checks it without blocking: hang-up, error, or end of stream.
// A client whose end of stream comes with its request (shutdown(SHUT_WR) right after it, as
// `nc -N` and some HTTP clients do) is waiting for the answer, not gone, and TCP shows that
// half-close exactly as it shows a close. Only a write tells them apart: a client that closed
// answers it with a reset. So, while no byte of the response has been sent and the request is
// HTTP/1.1, the probe answers an end of stream with an interim `100 Continue` (RFC 9110 §15.2:
// a client must parse 1xx responses it did not ask for), and the reset, if one comes, marks the
// client gone. Where that cannot be sent (HTTP/1.0, or the response has begun: its own writes
// then meet the reset), an end of stream seen when the probe is made or within kHalfCloseGrace
// after is taken for a half-close, and one that comes later for a departure.
#pragma once
#include <chrono>
#include <string>

namespace sluice::serve {

class ConnectionProbe {
 public:
  static constexpr std::chrono::milliseconds kHalfCloseGrace{500};

  // Call while the connection is certainly open (in its request handler). When its socket cannot
  // be found then (an unexpected platform), the probe stays inert and never reports a close.
  // `interim_ok`: the request is HTTP/1.1, and nothing of the response has been written yet.
  // `socket_hint`: the socket the server believes it is (GuardedServer::current_socket()); used
  // when its addresses match, else the process's descriptors are searched.
  ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr, int remote_port,
                  bool interim_ok = false, int socket_hint = -1);
  // Call before the response's first byte is written (an interim response would then corrupt it).
  void response_started() { interim_ok_ = false; }
  // True once the peer has closed (or the socket is gone: it was closed here).
  bool closed();
  bool inert() const { return inert_; }
  bool half_closed() const { return half_closed_; }

 private:
  bool matches(int fd) const;
  int find_socket() const;
  bool peer_finished_sending() const;
  bool send_continue() const;
  bool reset_seen() const;
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;
  bool closed_ = false;
  bool inert_ = false;
  bool half_closed_ = false;  // the client shut its sending side along with its request
  bool interim_ok_ = false;   // a 100 Continue may still be written
  std::chrono::steady_clock::time_point made_ = std::chrono::steady_clock::now();
};

}  // namespace sluice::serve
