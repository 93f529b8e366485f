// Tells whether an HTTP client is still connected. cpp-httplib 0.11 (Debian 12) hands handlers no
// socket and no "connection closed" query, so the probe finds the connection's socket by its
// address pair (local and remote address and port, which the request does carry) among this
// process's descriptors, then checks it without blocking: hang-up, error, or end of stream.
// A client whose end of stream comes with its request (shutdown(SHUT_WR) right after it, as
// `nc -N` and some HTTP clients do: seen when the probe is made or within kHalfCloseGrace after)
// is waiting for the answer, not gone: for it only a reset or a hang-up counts (a write to a
// client that really left fails too). TCP cannot tell that half-close from a close, so an end of
// stream that comes later means the client went away.
#pragma once
#include <chrono>
#include <string>

namespace sluice::serve {

class ConnectionProbe {
 public:
  static constexpr std::chrono::milliseconds kHalfCloseGrace{500};

  // Call while the connection is certainly open (in its request handler). When its socket cannot
  // be found then (an unexpected platform), the probe stays inert and never reports a close.
  ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr, int remote_port);
  // True once the peer has closed (or the socket is gone: it was closed here).
  bool closed();
  bool inert() const { return inert_; }
  bool half_closed() const { return half_closed_; }

 private:
  bool matches(int fd) const;
  int find_socket() const;
  bool peer_finished_sending() const;
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;
  bool closed_ = false;
  bool inert_ = false;
  bool half_closed_ = false;  // the client shut its sending side along with its request
  std::chrono::steady_clock::time_point made_ = std::chrono::steady_clock::now();
};

}  // namespace sluice::serve
