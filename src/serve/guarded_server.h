// cpp-httplib's Server with the connection handling a server facing untrusted clients needs and
// httplib 0.11 (Debian 12) lacks. httplib gives every connection a thread for its whole life, so
// idle or trickling clients used to hold up to --max-connections threads and crowd out everything
// else, /health included. Here one event thread (epoll) holds every connection that is between
// requests or still sending a request's line and headers; a request whose headers are in goes to
// a worker thread (at most max_requests at once), which runs httplib's parser and routes over the
// bytes already read and hands the connection back after the response. GET /health is answered
// on the event thread itself, ahead of everything. Also: caps on open connections, in total and
// per client address (one more is answered 503 at once and closed); a deadline on each request's
// headers that trickled bytes cannot extend; a deadline on each request's body; a listen backlog
// of SOMAXCONN; no SO_REUSEPORT (a second server on a busy port fails to bind instead of taking
// half the requests); a connection closed after any response that says "Connection: close"
// (httplib keeps it open unless the request asked), after a linger that reads away what the client
// still sends (closing with unread bytes resets the connection, which can destroy the response);
// reads and writes that still serve a half-closed client; one log line per request on stderr.
#pragma once
#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace sluice::serve {

struct ConnectionLimits {
  size_t max_connections = 2048;  // open at once (idle ones need no thread); more are refused (503)
  size_t max_per_client = 256;    // open at once from one client address; more are refused (503)
  size_t max_requests = 256;      // requests read or answered at once, one thread each; more: 503
  int header_timeout_ms = 10000;  // total time to receive a request's line and headers
  int idle_timeout_ms = 5000;     // a kept-alive connection's wait for its next request
  int read_timeout_ms = 30000;    // each read of a request body
  // A request's whole body is due within body_timeout_ms plus its length at body_min_bytes_per_s:
  // a client trickling it cannot hold a connection longer (each read's timeout alone reset with
  // every byte).
  int body_timeout_ms = 30000;
  size_t body_min_bytes_per_s = size_t(64) << 10;
  int write_timeout_ms = 30000;   // each write of a response
  // Bodies larger than body_exempt_bytes count against body_bytes_in_flight while their request
  // is read and served (0: no limit); see admit_body.
  size_t body_bytes_in_flight = 0;
  size_t body_exempt_bytes = size_t(1) << 20;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const ConnectionLimits& limits);

  // After bind_to_port / bind_to_any_port: listen with a backlog of SOMAXCONN (httplib's is 5, so
  // a burst of connections was refused by the kernel before the server saw it).
  void raise_backlog();
  size_t open_connections() const { return open_.load(); }
  // The socket of the connection whose request this thread is serving (-1 on other threads).
  static int current_socket();

  // For the pre-routing handler: the current connection's request line and headers are in; its
  // header deadline no longer applies (the body is read under the per-read timeout).
  static void headers_received();
  // For the error handler: true when the current request's headers missed their deadline (httplib
  // reports that as a malformed request; the server answers 408).
  static bool header_deadline_missed();
  // Likewise for the body's deadline (ConnectionLimits::body_timeout_ms).
  static bool body_deadline_missed();
  // For the pre-routing handler, before the body is read: starts the body's deadline and counts the
  // current request's body of `bytes` against body_bytes_in_flight until the request is done; false
  // (nothing counted) when it does not fit beside the bodies already in flight.
  static bool admit_body(size_t bytes);
  // Reads and drops the current request's body of `bytes` (a request refused before its body was
  // read, so that the connection stays in step and the client can read the answer); false when
  // the client stopped sending.
  static bool discard_body(size_t bytes);
  size_t body_bytes_in_flight() const { return body_bytes_.load(); }

 private:
  class ConnectionStream;
  class ConnectionQueue;
  struct Connection;
  class EventLoop;
  // Called by httplib's accept loop for each accepted socket (through ConnectionQueue): counts it
  // against the caps and hands it to the event thread, or refuses it.
  bool process_and_close_socket(socket_t sock) override;
  // Answers 503 (`code`, `message`) and closes, without waiting on the client.
  static void refuse(int sock, const std::string& peer, const char* code, const std::string& message,
                     const char* note);
  // Runs the request whose headers are in c->in (on a worker, or on the event thread for /health):
  // true when the connection can carry another request (its unread bytes are back in c->in).
  bool serve_request(Connection& c, bool on_event_thread);
  // Closes the socket and releases its place under the caps.
  void close_connection(Connection& c);
  void worker(std::unique_ptr<Connection> c);

  // The request this thread is serving (a worker's, or the event thread's /health or late request);
  // null between requests and on the accept thread.
  static thread_local ConnectionStream* current_;
  static thread_local GuardedServer* current_server_;

  ConnectionLimits limits_;
  ConnectionLimits event_thread_limits_;  // no waiting on a client: reads and writes that would block fail
  std::atomic<size_t> open_{0};
  std::atomic<size_t> body_bytes_{0};
  std::mutex clients_mu_;
  std::unordered_map<std::string, size_t> per_client_;  // open connections by client address
  EventLoop* loop_ = nullptr;  // owned by the ConnectionQueue httplib makes for each listen
};

}  // namespace sluice::serve
