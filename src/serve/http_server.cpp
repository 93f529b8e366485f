// HTTP routes over cpp-httplib: every generation request is validated and tokenized on its own
// connection thread, admitted (or refused with 429), then waits for its turn while its client is
// watched; a streamed response runs its generation inside the chunked content provider so that
// each SSE chunk goes out as soon as its token is decided.
#include "serve/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "serve/connection_probe.h"
#include "serve/guarded_server.h"
#include "serve/sse.h"

namespace sluice::serve {
namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump_json(error_body(e)), "application/json");
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Constant-time comparison so that the key cannot be guessed byte by byte from response times.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

std::string reason_for(int status, const httplib::Request& req, size_t limit) {
  switch (status) {
    case 404: return "Unknown request URL: " + req.method + " " + req.path + ".";
    case 405: return "Method " + req.method + " is not allowed for " + req.path + ".";
    case 413:
      // cpp-httplib parses form-encoded bodies itself and caps them far lower than --max-request-bytes.
      if (req.get_header_value("Content-Type").find("x-www-form-urlencoded") != std::string::npos)
        return "The request body is too large for Content-Type application/x-www-form-urlencoded; send JSON with "
               "'Content-Type: application/json'.";
      return "The request body is larger than this server's limit of " + std::to_string(limit) + " bytes.";
    case 400: return "The request could not be parsed as HTTP.";
    default: return "HTTP error " + std::to_string(status) + ".";
  }
}

void handle_generation(Service& service, bool chat, const httplib::Request& req, httplib::Response& res) {
  // Admission comes after validation and before tokenizing: a request that cannot run is refused
  // before its prompt costs anything (prompts are tokenized by at most queue + 1 requests at once).
  std::shared_ptr<Admission::Ticket> ticket;
  auto admit = [&] {
    if (service.shutting_down())
      throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
    ticket = service.admission().try_enter();
    if (!ticket) {
      res.set_header("Retry-After", "1");
      throw ApiError(429,
                     "The server is busy: one generation is running and " + std::to_string(service.options().queue) +
                         " more may wait (--queue). Retry later.",
                     "rate_limit_error", "", "rate_limit_exceeded");
    }
  };
  PreparedRequest p;
  try {
    p = chat ? service.prepare_chat(req.body, admit) : service.prepare_completion(req.body, admit);
  } catch (const ApiError& e) {
    return send_error(res, e);
  } catch (const Error& e) {
    return send_error(res, ApiError(400, e.what(), "invalid_request_error"));
  }
  // Until the handler returns (a whole response) or the stream's headers go out, nothing of the
  // response is written, so the probe may send an interim response to tell a close from a
  // half-close.
  auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port,
                                                 req.version == "HTTP/1.1");
  static std::atomic<bool> warned{false};
  if (probe->inert() && !warned.exchange(true))
    std::fprintf(stderr, "sluice serve: warning: cannot find client sockets; disconnects will not cancel generations\n");
  if (!ticket->wait_turn([&] { return service.shutting_down() || probe->closed(); })) {
    if (service.shutting_down())
      return send_error(res, ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down"));
    res.status = 499;  // client closed the connection while waiting; nothing will be read
    return;
  }
  if (!p.common.stream) {
    try {
      Json j = service.run(p, {}, [&] { return probe->closed(); });
      res.set_content(dump_json(j), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const ClientGone&) {
      res.status = 499;
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("Generation failed: ") + e.what(), "server_error"));
    }
    return;
  }
  auto prepared = std::make_shared<PreparedRequest>(std::move(p));
  probe->response_started();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [&service, ticket, prepared, probe](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        try {
          service.run(*prepared, write, [&] { return probe->closed(); });
        } catch (const ClientGone&) {
          return false;
        } catch (const ApiError&) {
          // Shutting down: the error event was sent; end the stream.
        } catch (const std::exception& e) {
          write(sse_event(error_body(ApiError(500, std::string("Generation failed: ") + e.what(), "server_error"))));
        }
        sink.done();
        return true;
      });
}

}  // namespace

int serve_http(Service& service) {
  const ServeOptions& o = service.options();
  // Request bodies, their parsed JSON and prompts may each be as large as --max-request-bytes.
  // Blocks of 1 MiB and more are mapped on their own, so each goes back to the system when it is
  // freed (glibc's default threshold climbs to 32 MiB, and smaller freed blocks stayed in the
  // connection threads' arenas: 388 MB resident after eight 100 MB prompts, and a 4.3 GB peak).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Signals go to one waiting thread (blocked everywhere else, including httplib's workers).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  ConnectionLimits limits;
  limits.max_connections = o.max_connections;
  limits.header_timeout_ms = o.header_timeout_s * 1000;
  limits.body_bytes_in_flight = std::max(
      o.max_request_bytes_in_flight ? o.max_request_bytes_in_flight : (o.queue + 1) * o.max_request_bytes,
      o.max_request_bytes);
  GuardedServer svr(limits);
  svr.set_payload_max_length(o.max_request_bytes);

  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    GuardedServer::headers_received();
    if (!o.api_key.empty() && req.path != "/health" && req.path != "/v1/health") {
      std::string auth = req.get_header_value("Authorization");
      const std::string bearer = "Bearer ";
      if (auth.rfind(bearer, 0) != 0 || !same_secret(auth.substr(bearer.size()), o.api_key)) {
        send_error(res, ApiError(401,
                                 auth.empty() ? "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'."
                                              : "Incorrect API key provided.",
                                 "invalid_request_error", "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // The body is read next: count it against the bodies in flight, or read it away and say 429.
    // A chunked body's size is unknown until read, so it counts as the largest allowed.
    const bool chunked = req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    const std::string length_text = req.get_header_value("Content-Length");
    size_t length = 0;
    if (chunked) length = o.max_request_bytes;
    else if (!length_text.empty()) length = size_t(std::strtoull(length_text.c_str(), nullptr, 10));
    if (length > o.max_request_bytes && !chunked) return httplib::Server::HandlerResponse::Unhandled;  // 413
    if (!GuardedServer::admit_body(length)) {
      if (chunked || !GuardedServer::discard_body(length)) res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      send_error(res, ApiError(429,
                               "The server is already reading or serving " +
                                   std::to_string(svr.body_bytes_in_flight() >> 20) +
                                   " MiB of large request bodies, and this one (" + std::to_string(length >> 20) +
                                   " MiB) would pass its limit of " + std::to_string(limits.body_bytes_in_flight >> 20) +
                                   " MiB (--max-request-bytes-in-flight). Retry later.",
                               "rate_limit_error", "", "rate_limit_exceeded"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib produces itself (404, 413, malformed HTTP) get an OpenAI-shaped body too.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.status == 499) return httplib::Server::HandlerResponse::Unhandled;
    if (GuardedServer::header_deadline_missed()) {
      res.status = 408;
      res.set_header("Connection", "close");
      send_error(res, ApiError(408,
                               "The request headers did not arrive within " + std::to_string(o.header_timeout_s) +
                                   " s (--header-timeout).",
                               "invalid_request_error", "", "request_timeout"));
      return httplib::Server::HandlerResponse::Handled;
    }
    std::string type = res.status >= 500 ? "server_error" : "invalid_request_error";
    std::string code = res.status == 413 ? "request_too_large" : res.status == 404 ? "unknown_url" : "";
    send_error(res, ApiError(res.status, reason_for(res.status, req, o.max_request_bytes), type, "", code));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "Internal error: " + what, "server_error"));
  });

  auto json_route = [&](auto make) {
    return [make](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_json(make()), "application/json");
    };
  };
  for (const char* prefix : {"/v1", ""}) {
    std::string p = prefix;
    svr.Get(p + "/models", json_route([&] { return service.models_json(); }));
    svr.Get(p + "/models/(.+)", [&](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] != service.limits().model_id)
        return send_error(res, ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist.",
                                        "invalid_request_error", "model", "model_not_found"));
      res.set_content(dump_json(service.models_json()["data"][0]), "application/json");
    });
    svr.Get(p + "/health", json_route([&] { return service.health_json(); }));
    svr.Post(p + "/completions", [&](const httplib::Request& req, httplib::Response& res) {
      handle_generation(service, false, req, res);
    });
    svr.Post(p + "/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
      handle_generation(service, true, req, res);
    });
  }

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) fail("cannot listen on ", o.host, " (any port)");
  } else if (!svr.bind_to_port(o.host, port)) {
    fail("cannot listen on ", o.host, ":", port, " (in use, or not an address of this machine?)");
  }
  svr.raise_backlog();
  if (!is_loopback(o.host) && o.api_key.empty())
    std::fprintf(stderr, "sluice serve: warning: listening on %s without --api-key; anyone who can reach it may use it\n",
                 o.host.c_str());
  std::fprintf(stderr, "sluice serve: listening on http://%s:%d (model '%s', queue %zu)\n", o.host.c_str(), port,
               service.limits().model_id.c_str(), o.queue);
  std::fflush(stderr);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "sluice serve: %s: finishing; running and waiting generations are stopped\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    service.begin_shutdown();
    svr.stop();
    // A second signal while connections drain ends the process at once.
    sigwait(&stop_signals, &sig);
    std::_Exit(130);
  });
  waiter.detach();
  bool ok = svr.listen_after_bind();
  std::fprintf(stderr, "sluice serve: stopped after %lld completed requests\n", (long long)service.completed());
  return ok || service.shutting_down() ? 0 : 1;
}

}  // namespace sluice::serve
