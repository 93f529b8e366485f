// Socket lookup by address pair and a non-blocking liveness check (poll + MSG_PEEK).
#include "serve/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sluice::serve {
namespace {

bool address_is(const sockaddr_storage& a, const std::string& addr, int port) {
  char text[INET6_ADDRSTRLEN] = {0};
  int p = -1;
  if (a.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    p = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    p = ntohs(in->sin6_port);
  } else {
    return false;
  }
  return p == port && addr == text;
}

}  // namespace

ConnectionProbe::ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr, int remote_port,
                                 bool interim_ok, int socket_hint)
    : local_addr_(std::move(local_addr)), remote_addr_(std::move(remote_addr)), local_port_(local_port),
      remote_port_(remote_port), interim_ok_(interim_ok) {
  fd_ = socket_hint >= 0 && matches(socket_hint) ? socket_hint : find_socket();
  inert_ = fd_ < 0;
  half_closed_ = !inert_ && !interim_ok_ && peer_finished_sending();
}

bool ConnectionProbe::send_continue() const {
  static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  size_t sent = 0;
  while (sent < sizeof kContinue - 1) {
    ssize_t n = ::send(fd_, kContinue + sent, sizeof kContinue - 1 - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

bool ConnectionProbe::reset_seen() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

bool ConnectionProbe::peer_finished_sending() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & POLLRDHUP) return true;
  char c;
  return (p.revents & POLLIN) && recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool ConnectionProbe::matches(int fd) const {
  sockaddr_storage local{}, remote{};
  socklen_t ll = sizeof local, rl = sizeof remote;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rl) != 0) return false;
  return address_is(local, local_addr_, local_port_) && address_is(remote, remote_addr_, remote_port_);
}

int ConnectionProbe::find_socket() const {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    if (fd != dirfd(dir) && matches(fd)) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ConnectionProbe::closed() {
  if (closed_) return true;
  if (inert_) return false;
  // Re-check the pair each time: a closed descriptor's number may be reused by another socket.
  if (!matches(fd_)) return closed_ = true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return closed_ = true;
  if (half_closed_) return false;  // its end of stream came with its request
  bool end_of_stream = p.revents & POLLRDHUP;
  if (!end_of_stream && (p.revents & POLLIN)) {
    char c;  // n > 0 is a pipelined request
    end_of_stream = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  if (!end_of_stream) return false;
  if (interim_ok_) {
    // Ask once; a client that closed answers with a reset, at once on loopback (checked here) or
    // a round trip later (POLLHUP/POLLERR above on a later call). No reset: it is waiting.
    interim_ok_ = false;
    if (!send_continue() || reset_seen()) return closed_ = true;
    half_closed_ = true;
    return false;
  }
  if (std::chrono::steady_clock::now() - made_ < kHalfCloseGrace) {
    half_closed_ = true;  // a half-close that trailed its request a little
    return false;
  }
  return closed_ = true;
}

}  // namespace sluice::serve
