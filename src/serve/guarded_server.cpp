// The connection handling behind GuardedServer. httplib's accept loop hands each accepted socket
// to process_and_close_socket, which counts it against the caps and gives it to the EventLoop: one
// thread and one epoll set for every connection that is between requests or still sending a
// request's line and headers. Once a request's headers are in (or kHeadBytes came without their
// end: httplib's parser judges that), the loop answers it itself if it is GET /health, or gives the
// connection to a worker (a WorkerPool of up to max_requests threads), which runs httplib's parser
// and routes over a ConnectionStream holding the bytes read so far and hands the connection back
// after the response, unless it ends there. A deadline missed on the event thread is answered
// there: 408 for a request's headers, a close for an idle kept-alive connection; a connection ended
// after a response lingers on the event thread (kLinger) before its close.
#include "serve/guarded_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

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

// The client's address and port (numeric).
std::pair<std::string, std::string> peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
  return {host, port};
}

// The request log line: client, request, status, response bytes (headers included), duration.
void log_request(const std::string& client, const std::string& request, int status, size_t bytes, double ms,
                 const char* note = "") {
  std::fprintf(stderr, "sluice serve: %s \"%s\" %d %zu B %.1f ms%s\n", client.c_str(), request.c_str(), status, bytes,
               ms, note);
}

// A request's line and headers are held on the event thread up to this size; past it without their
// end, a worker's httplib parser reads on and answers (it limits each line to 8 KiB).
constexpr size_t kHeadBytes = size_t(64) << 10;
// How often the event thread looks for missed deadlines (they are met to within this).
constexpr auto kSweepEvery = std::chrono::milliseconds(50);
// A connection ended after a response is closed only once the client has closed it too, or after
// this long: what it is still sending is read and dropped meanwhile. Closing a socket with unread
// bytes sends a reset, which can destroy the response before the client has read it (a client
// trickling headers past its deadline lost its 408 that way).
constexpr auto kLinger = std::chrono::seconds(1);

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// True when `head` (a request line and headers, through their blank line) asks GET or HEAD of
// /health or /v1/health (a query allowed) and announces no body: the event thread answers it
// without waiting for anything.
bool is_health_check(std::string_view head) {
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return false;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET" && method != "HEAD") return false;
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/health" && path != "/v1/health") return false;
  for (size_t at = eol; at != std::string_view::npos && at + 2 < head.size(); at = head.find("\r\n", at + 2)) {
    const std::string_view field = head.substr(at + 2);
    if (starts_with_nocase(field, "content-length:") || starts_with_nocase(field, "transfer-encoding:")) return false;
  }
  return true;
}

// Threads for requests, made as needed up to a limit. An idle thread waits for work of its own, and
// new work goes to the thread idle the shortest time (LIFO): a few warm threads serve a steady
// load, rather than every thread of the pool in turn (each touching its own stack and allocator
// arena: the server's resident size grew round after round of a steady load that way).
class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads) : max_(max_threads) {}
  ~WorkerPool() { shutdown(); }

  // Runs `job` on an idle thread or a new one; false (job not run) when `max_threads` are busy.
  bool run(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    if (!idle_.empty()) {
      Worker* w = idle_.back();
      idle_.pop_back();
      w->job = std::move(job);
      w->wake.notify_one();
      return true;
    }
    if (all_.size() >= max_) return false;
    auto w = std::make_unique<Worker>();
    w->job = std::move(job);
    w->thread = std::thread([this, p = w.get()] { loop(*p); });
    all_.push_back(std::move(w));
    return true;
  }
  // Lets the running jobs finish, then ends every thread.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      for (auto& w : all_) w->wake.notify_one();
    }
    for (auto& w : all_) w->thread.join();  // no new thread starts once stopping_ is set
  }

 private:
  struct Worker {
    std::thread thread;
    std::condition_variable wake;
    std::function<void()> job;
  };
  void loop(Worker& w) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      w.wake.wait(lock, [&] { return w.job || stopping_; });
      if (!w.job) return;
      std::function<void()> job = std::move(w.job);
      w.job = nullptr;
      lock.unlock();
      job();
      lock.lock();
      idle_.push_back(&w);
    }
  }

  const size_t max_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> all_;
  std::vector<Worker*> idle_;  // the most recently idle last
  bool stopping_ = false;
};

}  // namespace

// A connection and what the event thread knows of it.
struct GuardedServer::Connection {
  int fd = -1;
  std::string client;  // address only: the key of the per-client count
  std::string port;
  std::string in;      // bytes received and not yet parsed
  size_t scanned = 0;  // `in` searched for the end of the headers up to here
  bool in_request = true;  // inside a request (its header deadline) rather than between two (idle deadline)
  bool eof = false;        // the client sent its last byte (or reset)
  bool closing = false;    // answered and shut for writing: lingers until the client closes (kLinger)
  Clock::time_point started{}, deadline{};

  std::string peer() const { return client + ":" + port; }  // for the log
  // A request begins (its first byte came, or the connection is new): its headers are due.
  void begin_request(Clock::time_point now, const ConnectionLimits& l) {
    in_request = true;
    started = now;
    deadline = now + std::chrono::milliseconds(l.header_timeout_ms);
  }
  // After the last response: shut for writing; closed once the client closes, or at the deadline.
  void end(Clock::time_point now) {
    closing = true;
    in.clear();
    ::shutdown(fd, SHUT_WR);
    deadline = now + kLinger;
  }
  // After a response on a connection that stays open: idle until the next request's first byte
  // (unless it came already: pipelined).
  void await_request(Clock::time_point now, const ConnectionLimits& l) {
    scanned = 0;
    if (!in.empty()) return begin_request(now, l);
    in_request = false;
    deadline = now + std::chrono::milliseconds(l.idle_timeout_ms);
  }
};

// One connection's socket, as httplib's parser and response writer see it. Reads come first from
// the bytes the event thread read (the request's line and headers, perhaps more), then from the
// socket, buffered (httplib reads headers a byte at a time); while a request's headers are being
// read they wait at most until the header deadline, so a client trickling one byte a second is cut
// off at the deadline rather than every read timeout. Writes fail only on a reset or a closed
// socket: a client that shut down its sending side (its request is complete) still gets its
// response.
class GuardedServer::ConnectionStream final : public httplib::Stream {
 public:
  // One request that began at `started` with `bytes` already read: its line and headers are due by
  // `header_deadline`.
  ConnectionStream(int fd, const ConnectionLimits& limits, std::string bytes, Clock::time_point started,
                   Clock::time_point header_deadline)
      : fd_(fd), limits_(limits), buffer_(std::move(bytes)), started_(started), header_deadline_(header_deadline) {}
  size_t body_counted = 0;  // this request's bytes in GuardedServer::body_bytes_

  // What was read but not parsed (the start of a pipelined request).
  std::string take_unread() { return at_ == 0 ? std::move(buffer_) : buffer_.substr(at_); }
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
  size_t written() const { return written_; }
  Clock::time_point started() const { return started_; }

  bool is_readable() const override { return unread() > 0 || (wait_for(fd_, POLLIN, read_wait_ms()) & POLLIN) != 0; }
  bool is_writable() const override { return writable(limits_.write_timeout_ms); }

  ssize_t read(char* ptr, size_t size) override {
    if (unread() == 0) {
      int ms = read_wait_ms();
      short ev = ms > 0 ? wait_for(fd_, POLLIN, ms) : 0;
      if (!(ev & (POLLIN | POLLHUP | POLLERR))) {
        if (in_headers_) deadline_missed_ = true;
        else if (in_body_ && Clock::now() >= body_deadline_) body_deadline_missed_ = true;
        return -1;
      }
      buffer_.resize(kReadBytes);
      ssize_t n;
      do {
        n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      buffer_.resize(size_t(std::max<ssize_t>(n, 0)));
      at_ = 0;
      if (n <= 0) return n;
    }
    size_t n = std::min(size, unread());
    std::memcpy(ptr, buffer_.data() + at_, n);
    at_ += n;
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
  static constexpr size_t kReadBytes = 4096;
  size_t unread() const { return buffer_.size() - at_; }
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
  std::string buffer_;
  size_t at_ = 0;
  Clock::time_point started_{}, header_deadline_{}, body_deadline_{};
  bool in_headers_ = true, deadline_missed_ = false, in_body_ = false, body_deadline_missed_ = false;
  size_t written_ = 0;
};

thread_local GuardedServer::ConnectionStream* GuardedServer::current_ = nullptr;
thread_local GuardedServer* GuardedServer::current_server_ = nullptr;

// The event thread: every connection between requests or inside a request's line and headers, in
// one epoll set (level-triggered), with its deadline.
class GuardedServer::EventLoop {
 public:
  EventLoop(GuardedServer& server, WorkerPool& workers) : server_(server), workers_(workers) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.ptr = nullptr;  // the wake-up
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &e);
    thread_ = std::thread([this] { run(); });
  }
  ~EventLoop() {
    stop();
    ::close(wake_);
    ::close(epoll_);
  }
  // Takes the connection (moved from `c`) unless the loop is stopping (then `c` stays the caller's).
  bool add(std::unique_ptr<Connection>& c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return false;
      inbox_.push_back(std::move(c));
    }
    wake();
    return true;
  }
  // Ends the thread and closes every connection it holds.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake();
    thread_.join();
  }

 private:
  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_, &one, sizeof one);
  }

  void run() {
    epoll_event events[256];
    Clock::time_point last_sweep = Clock::now();
    for (;;) {
      const int n = ::epoll_wait(epoll_, events, 256, held_.empty() ? -1 : int(kSweepEvery.count()));
      if (n < 0 && errno != EINTR) {
        std::fprintf(stderr, "sluice serve: epoll_wait: %s\n", std::strerror(errno));
        break;
      }
      bool stopping = false;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          stopping = take_inbox() || stopping;
        } else {
          on_readable(static_cast<Connection*>(events[i].data.ptr));
        }
      }
      if (stopping) break;
      const Clock::time_point now = Clock::now();
      if (now - last_sweep >= kSweepEvery) {
        sweep(now);
        last_sweep = now;
      }
    }
    std::vector<std::unique_ptr<Connection>> rest;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rest = std::move(inbox_);
    }
    for (auto& [p, c] : held_) server_.close_connection(*c);
    for (auto& c : rest) server_.close_connection(*c);
    held_.clear();
  }

  // New connections and ones back from workers; true when the loop is to stop.
  bool take_inbox() {
    uint64_t count;
    [[maybe_unused]] ssize_t r = ::read(wake_, &count, sizeof count);
    std::vector<std::unique_ptr<Connection>> incoming;
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      incoming.swap(inbox_);
      stopping = stopping_;
    }
    for (auto& owned : incoming) {
      Connection* c = owned.get();
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.ptr = c;
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, c->fd, &e) != 0) {
        server_.close_connection(*c);
        continue;
      }
      held_.emplace(c, std::move(owned));
      if (!c->closing && !c->in.empty()) advance(c);  // a pipelined request may be complete already
    }
    return stopping;
  }

  void on_readable(Connection* c) {
    char chunk[16384];
    if (c->closing) {  // read away what it still sends until it closes
      ssize_t n;
      while ((n = ::recv(c->fd, chunk, sizeof chunk, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) drop(c);
      return;
    }
    while (c->in.size() < kHeadBytes) {
      const ssize_t n = ::recv(c->fd, chunk, std::min(sizeof chunk, kHeadBytes - c->in.size()), MSG_DONTWAIT);
      if (n > 0) {
        if (!c->in_request) c->begin_request(Clock::now(), server_.limits_);
        c->in.append(chunk, size_t(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c->eof = true;
        break;
      }
    }
    advance(c);
  }

  // After new bytes: a complete /health request is answered here (and then any pipelined one after
  // it), any other complete request goes to a worker; a client that stopped sending is let go.
  void advance(Connection* c) {
    for (;;) {
      const size_t end = c->in.find("\r\n\r\n", c->scanned >= 3 ? c->scanned - 3 : 0);
      if (end == std::string::npos && c->in.size() < kHeadBytes) {
        c->scanned = c->in.size();
        if (c->eof) drop(c);
        return;
      }
      if (end == std::string::npos || !is_health_check(std::string_view(c->in).substr(0, end + 4)))
        return hand_off(c);
      if (!server_.serve_request(*c, /*on_event_thread=*/true)) return c->end(Clock::now());
      c->await_request(Clock::now(), server_.limits_);
    }
  }

  void hand_off(Connection* c) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
    auto it = held_.find(c);
    std::unique_ptr<Connection> owned = std::move(it->second);
    held_.erase(it);
    // Owned by the job once it runs (a std::function must be copyable: no unique_ptr in it).
    auto shared = std::make_shared<std::unique_ptr<Connection>>(std::move(owned));
    if (!workers_.run([server = &server_, shared] { server->worker(std::move(*shared)); })) {
      refuse(c->fd, c->peer(), "server_busy",
             "The server is reading or answering " + std::to_string(server_.limits_.max_requests) +
                 " requests, its limit (--max-requests). Retry later.",
             " (request refused: --max-requests)");
      c->fd = -1;  // closed by refuse
      server_.close_connection(*c);
    }
  }

  // Deadlines: an idle or lingering connection is closed; a request whose headers are late is
  // answered 408 by httplib's parser over what came (which finds the deadline passed) and ended.
  void sweep(Clock::time_point now) {
    std::vector<Connection*> late;
    for (auto& [p, c] : held_)
      if (now >= c->deadline) late.push_back(p);
    for (Connection* c : late) {
      if (c->closing || !c->in_request) {
        drop(c);
      } else {
        server_.serve_request(*c, /*on_event_thread=*/true);
        c->end(now);
      }
    }
  }

  void drop(Connection* c) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
    auto it = held_.find(c);
    server_.close_connection(*c);
    held_.erase(it);
  }

  GuardedServer& server_;
  WorkerPool& workers_;
  int epoll_ = -1, wake_ = -1;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> inbox_;
  bool stopping_ = false;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> held_;
  std::thread thread_;
};

// httplib makes one queue per listen and calls enqueue(fn) for each accepted socket, fn running
// process_and_close_socket(sock): run at once on the accept thread, which only counts the socket
// and passes it to the event thread. The workers serve requests whose headers are in.
class GuardedServer::ConnectionQueue final : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(GuardedServer& server)
      : server_(server), workers_(server.limits_.max_requests), loop_(server, workers_) {
    server_.loop_ = &loop_;
  }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {
    loop_.stop();        // closes the connections it holds; workers' connections close after their response
    workers_.shutdown();
    server_.loop_ = nullptr;
  }

 private:
  GuardedServer& server_;
  WorkerPool workers_;
  EventLoop loop_;
};

GuardedServer::GuardedServer(const ConnectionLimits& limits) : limits_(limits), event_thread_limits_(limits) {
  event_thread_limits_.read_timeout_ms = 0;
  event_thread_limits_.write_timeout_ms = 0;
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

int GuardedServer::current_socket() { return current_ ? current_->socket() : -1; }

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

void GuardedServer::refuse(int sock, const std::string& peer, const char* code, const std::string& message,
                           const char* note) {
  const std::string body = "{\"error\":{\"message\":\"" + message +
                           "\",\"type\":\"server_error\",\"param\":null,\"code\":\"" + code + "\"}}";
  const std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  // Never block: the reply fits any fresh socket's send buffer. What the client already sent is
  // read away first, so that closing does not reset the connection (which can discard the reply
  // before the client reads it).
  char sink[4096];
  while (::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  ssize_t sent = ::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  while (::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  log_request(peer, "-", 503, sent > 0 ? size_t(sent) : 0, 0.0, note);
  ::close(sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  auto c = std::make_unique<Connection>();
  c->fd = sock;
  std::tie(c->client, c->port) = peer_of(sock);
  const std::string peer = c->peer();
  if (open_.fetch_add(1) >= limits_.max_connections) {
    --open_;
    refuse(sock, peer, "too_many_connections",
           "The server has " + std::to_string(limits_.max_connections) +
               " connections open, its limit (--max-connections). Retry later.",
           " (connection refused: --max-connections)");
    return true;
  }
  {
    std::unique_lock<std::mutex> lock(clients_mu_);
    size_t& mine = per_client_[c->client];
    if (mine >= limits_.max_per_client) {
      lock.unlock();
      --open_;
      refuse(sock, peer, "too_many_connections",
             "This client has " + std::to_string(limits_.max_per_client) +
                 " connections open, the limit for one address (--max-connections-per-client). Retry later.",
             " (connection refused: --max-connections-per-client)");
      return true;
    }
    ++mine;
  }
  c->begin_request(Clock::now(), limits_);
  if (!loop_ || !loop_->add(c)) close_connection(*c);
  return true;
}

void GuardedServer::close_connection(Connection& c) {
  if (c.fd >= 0) {
    ::shutdown(c.fd, SHUT_RDWR);
    ::close(c.fd);
    c.fd = -1;
  }
  {
    std::lock_guard<std::mutex> lock(clients_mu_);
    auto it = per_client_.find(c.client);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }
  --open_;
}

bool GuardedServer::serve_request(Connection& c, bool on_event_thread) {
  ConnectionStream stream(c.fd, on_event_thread ? event_thread_limits_ : limits_, std::move(c.in), c.started,
                          c.deadline);
  current_ = &stream;
  current_server_ = this;
  bool connection_closed = false;
  const bool ok = process_request(stream, /*close_connection=*/false, connection_closed, nullptr);
  body_bytes_ -= stream.body_counted;  // the request and its body are gone
  if (!ok && stream.deadline_missed() && stream.written() == 0) {
    // httplib gives up silently on a request line that never completed; say why.
    static const std::string reply = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    stream.write(reply.data(), reply.size());
    log_request(c.peer(), "-", 408, stream.written(), ms_since(stream.started()),
                " (request headers not received in time)");
  }
  current_ = nullptr;
  current_server_ = nullptr;
  c.in = stream.take_unread();
  return ok && !connection_closed && !stream.close_after;
}

void GuardedServer::worker(std::unique_ptr<Connection> c) {
  const bool keep = serve_request(*c, /*on_event_thread=*/false);
  // Back to the event thread: to wait for the next request, or to linger before the close.
  if (keep) c->await_request(Clock::now(), limits_);
  else c->end(Clock::now());
  if (!loop_ || !loop_->add(c)) close_connection(*c);
}

}  // namespace sluice::serve
