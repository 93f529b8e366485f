// The connection loop behind GuardedServer: httplib's accept loop hands every accepted socket to
// ConnectionQueue, which refuses it at once when the cap is reached or gives it a thread; the thread runs
// httplib's request parser and routes over ConnectionStream, a socket stream whose reads carry the header
// deadline and whose writes do not treat a client's half-close as a disconnect.
#include "serve/guarded_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace sluice::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// poll() for `events` on one socket for up to `ms` (0 = just look); the revents, or 0 on timeout.
short wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, std::max(ms, 0));
  } while (r < 0 && errno == EINTR);
  return r > 0 ? p.revents : 0;
}

std::string peer_text(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

// The request log line: client, request, status, response bytes (headers included), duration.
void log_request(const std::string& client, const std::string& request, int status, size_t bytes, double ms,
                 const char* note = "") {
  std::fprintf(stderr, "sluice serve: %s \"%s\" %d %zu B %.1f ms%s\n", client.c_str(), request.c_str(), status, bytes,
               ms, note);
}

}  // namespace

// One connection's socket, as httplib's parser and response writer see it. Reads are buffered
// (httplib reads headers a byte at a time) and wait at most until the header deadline while the
// request's headers are being read, so a client trickling one byte a second is cut off at the
// deadline rather than every read timeout. Writes fail only on a reset or a closed socket: a client
// that shut down its sending side (its request is complete) still gets its response.
class GuardedServer::ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}
  size_t body_counted = 0;  // this request's bytes in GuardedServer::body_bytes_

  // A new request starts: its line and headers are due within the header timeout from now.
  void begin_request() {
    started_ = Clock::now();
    header_deadline_ = started_ + std::chrono::milliseconds(limits_.header_timeout_ms);
    in_headers_ = true;
    in_body_ = false;
    deadline_missed_ = body_deadline_missed_ = false;
    written_ = 0;
  }
  // The body of `bytes` is read next: due within the body timeout plus its length at the rate floor.
  void start_body(size_t bytes) {
    const auto ms = int64_t(limits_.body_timeout_ms) +
                    int64_t(double(bytes) * 1000.0 / double(std::max<size_t>(limits_.body_min_bytes_per_s, 1)));
    body_deadline_ = Clock::now() + std::chrono::milliseconds(ms);
    in_body_ = true;
  }
  bool body_deadline_missed() const { return body_deadline_missed_; }
  // The response just written said "Connection: close": the connection ends after it (httplib keeps
  // it open unless the request asked for that).
  bool close_after = false;
  void end_headers() { in_headers_ = false; }
  bool deadline_missed() const { return deadline_missed_; }
  bool in_headers() const { return in_headers_; }
  size_t written() const { return written_; }
  Clock::time_point started() const { return started_; }
  // Between requests of a kept-alive connection: true when the next one starts arriving in time.
  bool wait_for_next_request() {
    return have_ > 0 || (wait_for(fd_, POLLIN, limits_.idle_timeout_ms) & (POLLIN | POLLHUP | POLLERR)) != 0;
  }

  bool is_readable() const override { return have_ > 0 || (wait_for(fd_, POLLIN, read_wait_ms()) & POLLIN) != 0; }
  bool is_writable() const override { return writable(limits_.write_timeout_ms); }

  ssize_t read(char* ptr, size_t size) override {
    if (have_ == 0) {
      int ms = read_wait_ms();
      short ev = ms > 0 ? wait_for(fd_, POLLIN, ms) : 0;
      if (!(ev & (POLLIN | POLLHUP | POLLERR))) {
        if (in_headers_) deadline_missed_ = true;
        else if (in_body_ && Clock::now() >= body_deadline_) body_deadline_missed_ = true;
        return -1;
      }
      ssize_t n;
      do {
        n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      have_ = size_t(n);
      at_ = 0;
    }
    size_t n = std::min(size, have_);
    std::memcpy(ptr, buffer_ + at_, n);
    at_ += n;
    have_ -= n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!writable(limits_.write_timeout_ms)) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    written_ += size_t(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(false, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(true, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // How long one read may wait: the read timeout, but never past the header or body deadline.
  // Rounded up: a wait that ended a fraction of a millisecond before the body's deadline was not
  // counted as a missed deadline, and the slow body got a 400 instead of its 408.
  int read_wait_ms() const {
    if (!in_headers_ && !in_body_) return limits_.read_timeout_ms;
    const Clock::time_point deadline = in_headers_ ? header_deadline_ : body_deadline_;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return int(std::clamp<int64_t>(left, 0, limits_.read_timeout_ms));
  }
  // POLLHUP means both directions are shut (or a reset); a half-close alone is not an error.
  bool writable(int ms) const {
    short ev = wait_for(fd_, POLLOUT, ms);
    return (ev & POLLOUT) && !(ev & (POLLHUP | POLLERR | POLLNVAL));
  }
  void address_of(bool local, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    int r = local ? ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len)
                  : ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    char host[NI_MAXHOST] = "", serv[NI_MAXSERV] = "0";
    if (r == 0)
      ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    ip = host;
    port = std::atoi(serv);
  }

  int fd_;
  const ConnectionLimits& limits_;
  char buffer_[4096];
  size_t at_ = 0, have_ = 0;
  Clock::time_point started_{}, header_deadline_{}, body_deadline_{};
  bool in_headers_ = false, deadline_missed_ = false, in_body_ = false, body_deadline_missed_ = false;
  size_t written_ = 0;
};

thread_local GuardedServer::ConnectionStream* GuardedServer::current_ = nullptr;
thread_local GuardedServer* GuardedServer::current_server_ = nullptr;
thread_local bool GuardedServer::refusing_ = false;

// httplib's accept loop calls enqueue(fn) for each accepted socket, where fn runs
// process_and_close_socket(sock). Under the cap, fn gets a thread of its own (there are as many as
// the cap, so no accepted connection waits behind slow ones); at the cap, fn runs right here on
// the accept thread with `refusing` set, which answers 503 and closes without reading.
class GuardedServer::ConnectionQueue final : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(GuardedServer& server) : server_(server), pool_(server.limits_.max_connections) {}
  void enqueue(std::function<void()> fn) override {
    if (server_.open_.fetch_add(1) >= server_.limits_.max_connections) {
      --server_.open_;
      refusing_ = true;
      fn();
      refusing_ = false;
      return;
    }
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      --server_.open_;
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  GuardedServer& server_;
  httplib::ThreadPool pool_;
};

GuardedServer::GuardedServer(const ConnectionLimits& limits) : limits_(limits) {
  new_task_queue = [this] { return new ConnectionQueue(*this); };
  // SO_REUSEADDR only (restarts need not wait out TIME_WAIT); httplib's default also sets
  // SO_REUSEPORT, which let a second server bind the same port and take half the connections.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  set_read_timeout(limits.read_timeout_ms / 1000, (limits.read_timeout_ms % 1000) * 1000);
  set_write_timeout(limits.write_timeout_ms / 1000, (limits.write_timeout_ms % 1000) * 1000);
  set_logger([](const httplib::Request& req, const httplib::Response& res) {
    ConnectionStream* s = current_;
    if (s && res.get_header_value("Connection") == "close") s->close_after = true;
    log_request(req.remote_addr + ":" + std::to_string(req.remote_port), req.method + " " + req.path, res.status,
                s ? s->written() : 0, s ? ms_since(s->started()) : 0.0);
  });
}

void GuardedServer::raise_backlog() {
  // listen() again on a listening socket changes its backlog (Linux).
  ::listen(svr_sock_, SOMAXCONN);
}

void GuardedServer::headers_received() {
  if (current_) current_->end_headers();
}

bool GuardedServer::header_deadline_missed() { return current_ && current_->deadline_missed(); }
bool GuardedServer::body_deadline_missed() { return current_ && current_->body_deadline_missed(); }

bool GuardedServer::admit_body(size_t bytes) {
  if (!current_ || !current_server_) return true;
  current_->start_body(bytes);
  const ConnectionLimits& l = current_server_->limits_;
  if (l.body_bytes_in_flight == 0 || bytes <= l.body_exempt_bytes) return true;
  std::atomic<size_t>& total = current_server_->body_bytes_;
  size_t now = total.load();
  do {
    if (now + bytes > l.body_bytes_in_flight) return false;
  } while (!total.compare_exchange_weak(now, now + bytes));
  current_->body_counted += bytes;
  return true;
}

bool GuardedServer::discard_body(size_t bytes) {
  if (!current_) return false;
  char sink[16384];
  while (bytes > 0) {
    ssize_t n = current_->read(sink, std::min(bytes, sizeof sink));
    if (n <= 0) return false;
    bytes -= size_t(n);
  }
  return true;
}

void GuardedServer::refuse(socket_t sock) {
  const std::string body = "{\"error\":{\"message\":\"The server has " + std::to_string(limits_.max_connections) +
                           " connections open, its limit (--max-connections). Retry later.\",\"type\":"
                           "\"server_error\",\"param\":null,\"code\":\"too_many_connections\"}}";
  const std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  // Never block the accept thread: the reply fits any fresh socket's send buffer. What the client
  // already sent is read away first, so that closing does not reset the connection (which can
  // discard the reply before the client reads it).
  char sink[4096];
  while (::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  ssize_t sent = ::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  while (::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  log_request(peer_text(sock), "-", 503, sent > 0 ? size_t(sent) : 0, 0.0, " (connection refused: --max-connections)");
  ::close(sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  if (refusing_) {
    refuse(sock);
    return true;
  }
  ConnectionStream stream(sock, limits_);
  current_ = &stream;
  current_server_ = this;
  for (bool first = true;; first = false) {
    if (!first && !stream.wait_for_next_request()) break;
    stream.begin_request();
    bool connection_closed = false;
    bool ok = process_request(stream, /*close_connection=*/false, connection_closed, nullptr);
    body_bytes_ -= stream.body_counted;  // the request and its body are gone
    stream.body_counted = 0;
    if (!ok && stream.deadline_missed() && stream.written() == 0) {
      // httplib gives up silently on a request line that never completed; say why.
      static const std::string reply =
          "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      stream.write(reply.data(), reply.size());
      log_request(peer_text(sock), "-", 408, stream.written(), ms_since(stream.started()),
                  " (request headers not received in time)");
    }
    if (!ok || connection_closed || stream.close_after) break;
  }
  current_ = nullptr;
  current_server_ = nullptr;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

}  // namespace sluice::serve
