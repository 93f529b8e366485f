// HTTP routes over cpp-httplib: every generation request (OpenAI or Anthropic) is validated and
// tokenized on its own connection thread, admitted (or refused), then waits for its turn while its
// client is watched; a streamed response runs its generation inside the chunked content provider
// so that each SSE event goes out as soon as its token is decided. Also the telemetry stream and
// the web chat's files.
#include "serve/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "serve/anthropic_reply.h"
#include "serve/connection_probe.h"
#include "serve/guarded_server.h"
#include "serve/sse.h"
#include "serve/web_assets.h"

namespace sluice::serve {
namespace {

// The Anthropic route answers errors in Anthropic's shape, every other route in OpenAI's.
bool anthropic_path(const std::string& path) {
  return path == "/v1/messages" || path == "/messages" || path.rfind("/v1/messages/", 0) == 0;
}

void send_error(httplib::Response& res, const ApiError& e, bool anthropic = false) {
  res.status = e.status;
  res.set_content(dump_json(anthropic ? anthropic_error_body(e) : error_body(e)), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, const httplib::Request& req) {
  send_error(res, e, anthropic_path(req.path));
}

// Routes anyone may read: health, and the web chat's files (the page asks for the key itself).
bool open_path(const std::string& path) {
  return path == "/health" || path == "/v1/health" || path == "/" || path.rfind("/web/", 0) == 0;
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

void handle_generation(Service& service, Api api, const httplib::Request& req, httplib::Response& res) {
  const bool anthropic = api == Api::messages;
  // Admission comes after validation and before tokenizing: a request that cannot run is refused
  // before its prompt costs anything (prompts are tokenized by at most queue + 1 requests at once).
  std::shared_ptr<Admission::Ticket> ticket;
  auto admit = [&] {
    if (service.shutting_down())
      throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
    ticket = service.admission().try_enter();
    if (!ticket) {
      res.set_header("Retry-After", "1");
      const std::string why = "The server is busy: one generation is running and " +
                              std::to_string(service.options().queue) + " more may wait (--queue). Retry later.";
      // Anthropic's word for a server at capacity is overloaded_error (HTTP 529).
      if (anthropic) throw ApiError(529, why, "overloaded_error");
      throw ApiError(429, why, "rate_limit_error", "", "rate_limit_exceeded");
    }
  };
  PreparedRequest p;
  try {
    switch (api) {
      case Api::completion: p = service.prepare_completion(req.body, admit); break;
      case Api::chat: p = service.prepare_chat(req.body, admit); break;
      case Api::messages: p = service.prepare_messages(req.body, admit); break;
      case Api::responses: p = service.prepare_responses(req.body, admit); break;
    }
  } catch (const ApiError& e) {
    return send_error(res, e, anthropic);
  } catch (const Error& e) {
    return send_error(res, ApiError(400, e.what(), "invalid_request_error"), anthropic);
  }
  // Until the handler returns (a whole response) or the stream's headers go out, nothing of the
  // response is written, so the probe may send an interim response to tell a close from a
  // half-close.
  auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port,
                                                 req.version == "HTTP/1.1", GuardedServer::current_socket());
  static std::atomic<bool> warned{false};
  if (probe->inert() && !warned.exchange(true))
    std::fprintf(stderr, "sluice serve: warning: cannot find client sockets; disconnects will not cancel generations\n");
  if (!ticket->wait_turn([&] { return service.shutting_down() || probe->closed(); })) {
    if (service.shutting_down())
      return send_error(res, ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down"),
                        anthropic);
    res.status = 499;  // client closed the connection while waiting; nothing will be read
    return;
  }
  if (!p.common.stream) {
    try {
      Json j = service.run(p, {}, [&] { return probe->closed(); });
      res.set_content(dump_json(j), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e, anthropic);
    } catch (const ClientGone&) {
      res.status = 499;
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("Generation failed: ") + e.what(), "server_error"), anthropic);
    }
    return;
  }
  auto prepared = std::make_shared<PreparedRequest>(std::move(p));
  probe->response_started();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [&service, ticket, prepared, probe, anthropic](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        try {
          service.run(*prepared, write, [&] { return probe->closed(); });
        } catch (const ClientGone&) {
          return false;
        } catch (const ApiError&) {
          // Shutting down: the error event was sent; end the stream.
        } catch (const std::exception& e) {
          const ApiError err(500, std::string("Generation failed: ") + e.what(), "server_error");
          write(anthropic ? sse_named_event(anthropic_error_body(err)) : sse_event(error_body(err)));
        }
        sink.done();
        return true;
      });
}

// GET /v1/telemetry: one SSE event at once and then about every second until the client leaves or
// the server shuts down; each stream holds one of --telemetry-streams places (and a connection).
void handle_telemetry(Service& service, httplib::Response& res) {
  std::shared_ptr<void> place = service.open_telemetry_stream();
  if (!place) {
    res.set_header("Retry-After", "5");
    return send_error(res, ApiError(429,
                                    "The server has " + std::to_string(service.options().telemetry_streams) +
                                        " telemetry streams open, its limit (--telemetry-streams). Retry later.",
                                    "rate_limit_error", "", "too_many_telemetry_streams"));
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The stream ends the connection too: a kept-alive connection would wait for another request.
  res.set_header("Connection", "close");
  res.set_chunked_content_provider("text/event-stream", [&service, place](size_t, httplib::DataSink& sink) {
    TelemetryMeter meter;
    using Clock = std::chrono::steady_clock;
    while (!service.shutting_down()) {
      const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
      const std::string event = sse_event(meter.next(service.telemetry_sample(), unix_ms));
      if (!sink.write(event.data(), event.size())) return false;
      const auto next = Clock::now() + std::chrono::seconds(1);
      while (!service.shutting_down() && Clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    sink.done();
    return true;
  });
}

void serve_asset(const httplib::Request& req, httplib::Response& res) {
  const WebAsset* a = find_web_asset(req.path);
  if (!a) return send_error(res, ApiError(404, "Unknown request URL: GET " + req.path + ".", "invalid_request_error",
                                          "", "unknown_url"));
  // Everything the page uses comes from this server; nothing may load from elsewhere.
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                 "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(a->body), a->content_type);
}

}  // namespace

namespace {
sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Each connection is a descriptor: the soft limit (often 1024) is raised toward the hard one to
// hold `wanted` connections beside the model's files and the drives' descriptors; where the hard
// limit is too low, fewer connections are allowed, and the log says so.
size_t connections_within_file_limit(size_t wanted) {
  constexpr rlim_t kOtherFiles = 1024;
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return wanted;
  const rlim_t need = rlim_t(wanted) + kOtherFiles;
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < need) {
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? need : std::min(need, r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
    ::getrlimit(RLIMIT_NOFILE, &r);
  }
  if (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= need) return wanted;
  const size_t allowed = r.rlim_cur > 2 * kOtherFiles ? size_t(r.rlim_cur - kOtherFiles) : size_t(r.rlim_cur / 2);
  std::fprintf(stderr,
               "sluice serve: warning: --max-connections %zu lowered to %zu: this process may open only %llu files "
               "(ulimit -Hn)\n",
               wanted, allowed, (unsigned long long)r.rlim_cur);
  return allowed;
}
}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int serve_http(Service& service) {
  const ServeOptions& o = service.options();
  // Request bodies, their parsed JSON and prompts may each be as large as --max-request-bytes.
  // Blocks of 1 MiB and more are mapped on their own, so each goes back to the system when it is
  // freed (glibc's default threshold climbs to 32 MiB, and smaller freed blocks stayed in the
  // connection threads' arenas: docs/BENCHMARKS.md, "Design measurements behind code comments").
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Signals go to one waiting thread (blocked everywhere else, including httplib's workers).
  const sigset_t stop_signals = stop_signal_set();
  block_stop_signals();
  ::signal(SIGPIPE, SIG_IGN);

  ConnectionLimits limits;
  limits.max_connections = connections_within_file_limit(o.max_connections);
  limits.max_per_client = o.max_connections_per_client;
  limits.max_requests = o.max_requests;
  limits.header_timeout_ms = o.header_timeout_s * 1000;
  limits.body_timeout_ms = o.body_timeout_s * 1000;
  limits.body_bytes_in_flight = std::max(
      o.max_request_bytes_in_flight ? o.max_request_bytes_in_flight : (o.queue + 1) * o.max_request_bytes,
      o.max_request_bytes);
  GuardedServer svr(limits);
  svr.set_payload_max_length(o.max_request_bytes);

  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    GuardedServer::headers_received();
    if (!o.api_key.empty() && !open_path(req.path)) {
      // OpenAI clients send 'Authorization: Bearer KEY', Anthropic's 'x-api-key: KEY'; either will do.
      const std::string auth = req.get_header_value("Authorization");
      const std::string x_api_key = req.get_header_value("x-api-key");
      const std::string bearer = "Bearer ";
      const bool ok = (auth.rfind(bearer, 0) == 0 && same_secret(auth.substr(bearer.size()), o.api_key)) ||
                      (!x_api_key.empty() && same_secret(x_api_key, o.api_key));
      if (!ok) {
        // The body was not read: the connection cannot carry another request.
        res.set_header("Connection", "close");
        send_error(res,
                   ApiError(401,
                            auth.empty() && x_api_key.empty()
                                ? "You didn't provide an API key. Send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'."
                                : "Incorrect API key provided.",
                            "invalid_request_error", "", "invalid_api_key"),
                   req);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // The body is read next: count it against the bodies in flight, or read it away and say 429.
    // A chunked body's size is unknown until read, so it counts as the largest allowed.
    const bool chunked = req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    const std::string length_text = req.get_header_value("Content-Length");
    size_t length = 0;
    if (chunked) {
      length = o.max_request_bytes;
    } else if (!length_text.empty()) {
      // Decided from the header, before a byte of the body is read: a malformed length is 400, one
      // past the limit 413, and neither connection can carry another request.
      const bool digits = length_text.size() <= 19 && length_text.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) {
        res.set_header("Connection", "close");
        send_error(res, ApiError(400, "Content-Length '" + length_text.substr(0, 40) + "' is not a byte count.",
                                 "invalid_request_error", "", "invalid_content_length"), req);
        return httplib::Server::HandlerResponse::Handled;
      }
      length = size_t(std::strtoull(length_text.c_str(), nullptr, 10));
      if (length > o.max_request_bytes) {
        res.set_header("Connection", "close");
        send_error(res, ApiError(413, reason_for(413, req, o.max_request_bytes), "invalid_request_error", "",
                                 "request_too_large"), req);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!GuardedServer::admit_body(length)) {
      if (chunked || !GuardedServer::discard_body(length)) res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      const bool anthropic = anthropic_path(req.path);
      send_error(res, ApiError(anthropic ? 529 : 429,
                               "The server is already reading or serving " +
                                   std::to_string(svr.body_bytes_in_flight() >> 20) +
                                   " MiB of large request bodies, and this one (" + std::to_string(length >> 20) +
                                   " MiB) would pass its limit of " + std::to_string(limits.body_bytes_in_flight >> 20) +
                                   " MiB (--max-request-bytes-in-flight). Retry later.",
                               "rate_limit_error", "", "rate_limit_exceeded"),
                 anthropic);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib produces itself (404, 413, malformed HTTP) get an OpenAI-shaped body too.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.status == 499) return httplib::Server::HandlerResponse::Unhandled;
    // httplib's own errors (malformed requests, bodies too large or too slow) leave the connection
    // out of step: it is closed after the answer, so each bad connection gets one error, not one
    // per line it sends.
    res.set_header("Connection", "close");
    if (GuardedServer::body_deadline_missed()) {
      res.status = 408;
      send_error(res, ApiError(408, "The request body did not arrive in time (a body is due within " +
                                        std::to_string(o.body_timeout_s) + " s plus 1 s per 64 KiB: --body-timeout).",
                               "invalid_request_error", "", "request_timeout"), req);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (GuardedServer::header_deadline_missed()) {
      res.status = 408;
      send_error(res,
                 ApiError(408,
                          "The request headers did not arrive within " + std::to_string(o.header_timeout_s) +
                              " s (--header-timeout).",
                          "invalid_request_error", "", "request_timeout"),
                 req);
      return httplib::Server::HandlerResponse::Handled;
    }
    std::string type = res.status >= 500 ? "server_error" : "invalid_request_error";
    std::string code = res.status == 413 ? "request_too_large" : res.status == 404 ? "unknown_url" : "";
    send_error(res, ApiError(res.status, reason_for(res.status, req, o.max_request_bytes), type, "", code), req);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "Internal error: " + what, "server_error"), req);
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
      handle_generation(service, Api::completion, req, res);
    });
    svr.Post(p + "/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
      handle_generation(service, Api::chat, req, res);
    });
    svr.Post(p + "/responses", [&](const httplib::Request& req, httplib::Response& res) {
      handle_generation(service, Api::responses, req, res);
    });
    svr.Post(p + "/messages", [&](const httplib::Request& req, httplib::Response& res) {
      handle_generation(service, Api::messages, req, res);
    });
    svr.Post(p + "/messages/count_tokens", [&](const httplib::Request& req, httplib::Response& res) {
      try {
        res.set_content(dump_json(service.count_message_tokens(req.body)), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e, req);
      }
    });
    svr.Get(p + "/telemetry", [&](const httplib::Request&, httplib::Response& res) { handle_telemetry(service, res); });
  }
  svr.Get("/", serve_asset);
  svr.Get("/web/(.+)", serve_asset);

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
