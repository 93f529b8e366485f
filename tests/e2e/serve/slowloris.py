"""Slow-client checks against a running `sluice serve` (loopback only; every socket has a timeout
and the whole run ends by itself within about 15 s).

  slowloris.py crowd PORT IDLE TRICKLING HEADER_TIMEOUT MODEL
      Opens IDLE idle and TRICKLING trickling connections from eight client addresses
      (127.0.0.2-9), then, while they are held and trickle, measures GET /health from 127.0.0.1
      back to back; fails when its 99th percentile passes 100 ms, or when a normal request (a
      two-token completion of MODEL) is not served meanwhile. Then checks that each connection got
      at most one response, a 408, and was closed by HEADER_TIMEOUT + 2 s, every trickling one
      with its 408.
  slowloris.py cap PORT CAP
      Holds CAP idle connections (from 127.0.0.2-9), then checks that one more gets a 503 within 1 s.
  slowloris.py per_client PORT CAP
      Holds CAP idle connections from 127.0.0.7; one more from there gets a 503 within 1 s, while
      one from 127.0.0.8 is served.
  slowloris.py busy PORT N
      Holds N requests on worker threads (headers sent, body not), then checks that one more gets
      a 503 at once while GET /health is still answered.
"""
import json
import resource
import socket
import sys
import time

HOST = "127.0.0.1"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def connect(port, source=None):
    s = socket.create_connection((HOST, port), timeout=5, source_address=(source, 0) if source else None)
    s.settimeout(5)
    return s


def raise_file_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        fail("this test opens %d sockets; the hard limit of open files is %d (ulimit -Hn)" % (need, hard))


def responses_in(data):
    return data.count(b"HTTP/1.1 ") if data else 0


def health_latency(port, limit=5.0):
    """Seconds for one GET /health, or `limit` when it did not answer within it."""
    start = time.monotonic()
    try:
        s = socket.create_connection((HOST, port), timeout=limit)
        s.settimeout(limit)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
    except (socket.timeout, OSError):
        return limit
    if not data.startswith(b"HTTP/1.1 200"):
        fail("/health answered: %r" % data[:200])
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    if body.get("status") != "ok":
        fail("/health body: %r" % body)
    return time.monotonic() - start


def read_all(s, deadline):
    """What the server sends until it closes, or None when it is still open at `deadline`."""
    data = b""
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    return None


def expect_refusal(port, source, what, code, mention):
    """One more connection (from `source`) gets a 503 with `code` naming `mention` within 1 s."""
    start = time.monotonic()
    extra = connect(port, source)
    # Not /health: that is answered ahead of the workers (only the connection caps refuse it).
    extra.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = read_all(extra, start + 1.0)
    took = time.monotonic() - start
    extra.close()
    if data is None:
        fail("%s was not answered within 1 s" % what)
    if not data.startswith(b"HTTP/1.1 503"):
        fail("%s got: %r" % (what, data[:200]))
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    if body["error"]["code"] != code or mention not in body["error"]["message"]:
        fail("%s: 503 body %r" % (what, body))
    print("%s: 503 in %.3f s" % (what, took))


SOURCES = ["127.0.0.%d" % k for k in range(2, 10)]


def check_cap(port, cap):
    time.sleep(0.3)  # connections of an earlier check are gone
    held = [connect(port, SOURCES[i % 8]) for i in range(cap)]
    time.sleep(0.3)  # the server has accepted them all
    expect_refusal(port, None, "connection %d (over --max-connections %d)" % (cap + 1, cap), "too_many_connections",
                   "--max-connections)")
    for s in held:
        s.close()


def check_per_client(port, cap):
    time.sleep(0.3)
    held = [connect(port, "127.0.0.7") for _ in range(cap)]
    time.sleep(0.3)
    expect_refusal(port, "127.0.0.7", "connection %d from one address (over %d)" % (cap + 1, cap),
                   "too_many_connections", "--max-connections-per-client")
    other = connect(port, "127.0.0.8")
    other.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = read_all(other, time.monotonic() + 1.0)
    if not data or not data.startswith(b"HTTP/1.1 200"):
        fail("a connection from another address beside the full one got: %r" % (data or b"")[:200])
    print("another address beside it: served")
    for s in held + [other]:
        s.close()


def check_busy(port, n):
    time.sleep(0.3)
    held = []
    for i in range(n):
        s = connect(port, SOURCES[i % 8])
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{")
        held.append(s)
    time.sleep(0.5)  # each is on a worker, waiting for its body
    expect_refusal(port, "127.0.0.10", "request %d (over --max-requests %d)" % (n + 1, n), "server_busy",
                   "--max-requests")
    took = health_latency(port, 1.0)
    if took >= 1.0:
        fail("/health was not answered while %d requests held every worker" % n)
    print("/health with every worker busy: %.3f s" % took)
    for s in held:
        s.close()


def completion(port, model):
    body = json.dumps({"model": model, "prompt": "hi", "max_tokens": 2}).encode()
    s = socket.create_connection((HOST, port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    data = read_all(s, time.monotonic() + 30)
    s.close()
    if not data or not data.startswith(b"HTTP/1.1 200"):
        fail("a completion beside the crowd got: %r" % (data or b"")[:300])
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"]


def check_crowd(port, n_idle, n_trickling, header_timeout, model):
    raise_file_limit(n_idle + n_trickling + 256)
    opened = time.monotonic()
    idle = [connect(port, SOURCES[i % 8]) for i in range(n_idle)]
    trickling = []
    for i in range(n_trickling):
        s = connect(port, SOURCES[i % 8])
        s.sendall(b"GET /health HTTP/1.1\r\n")
        trickling.append(s)
    print("opened %d idle and %d trickling connections in %.2f s" % (n_idle, n_trickling, time.monotonic() - opened))
    samples, served, line, last_trickle = [], None, 0, 0.0
    end = opened + header_timeout - 0.5
    while time.monotonic() < end:
        if time.monotonic() - last_trickle >= 0.3:
            for s in trickling:
                try:
                    s.sendall(b"X-Slow-%d: y\r\n" % line)
                except OSError:
                    pass  # cut off already; counted below
            line += 1
            last_trickle = time.monotonic()
        if served is None and len(samples) >= 50:
            served = completion(port, model)
        samples.append(health_latency(port, 1.0))
    samples.sort()
    p50, p99 = samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print("GET /health beside %d idle and %d trickling connections: %d samples, p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (n_idle, n_trickling, len(samples), p50 * 1e3, p99 * 1e3, samples[-1] * 1e3))
    if len(samples) < 100:
        fail("only %d /health samples in the window" % len(samples))
    if p99 > 0.1:
        fail("/health p99 %.1f ms (limit 100 ms)" % (p99 * 1e3))
    if served is None:
        fail("no completion was tried in the window")
    print("a completion beside them: %d tokens" % served)
    # Every connection ends by the header deadline (plus the server's 50 ms sweep) with at most one
    # response, a 408; the trickling ones keep sending and each gets its 408.
    deadline = opened + header_timeout + 2.0
    got = {s: b"" for s in idle + trickling}
    closed = set()
    while time.monotonic() < deadline and len(closed) < len(got):
        for s in trickling:
            if s not in closed:
                try:
                    s.sendall(b"X-Slow: y\r\n")
                except OSError:
                    pass
        for s in got:
            if s in closed:
                continue
            s.settimeout(0.001)
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        closed.add(s)
                        break
                    got[s] += chunk
            except socket.timeout:
                pass
            except (ConnectionResetError, BrokenPipeError):
                closed.add(s)
        time.sleep(0.2)
    if len(closed) < len(got):
        fail("%d of %d connections were still open %.1f s after they opened (header timeout %d s)"
             % (len(got) - len(closed), len(got), header_timeout + 2.0, header_timeout))
    many = [d for d in got.values() if responses_in(d) > 1]
    if many:
        fail("%d connections got more than one response: %r" % (len(many), many[0][:300]))
    not_408 = [d for d in got.values() if d and not d.startswith(b"HTTP/1.1 408")]
    if not_408:
        fail("%d connections got another answer than 408: %r" % (len(not_408), not_408[0][:300]))
    trickled_408 = sum(1 for s in trickling if got[s].startswith(b"HTTP/1.1 408"))
    if trickled_408 != len(trickling):
        fail("only %d of %d trickling connections got their 408" % (trickled_408, len(trickling)))
    print("all %d connections closed by the header deadline, one 408 each at most (%d trickling: 408)"
          % (len(got), trickled_408))
    for s in got:
        s.close()


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "cap":
        check_cap(port, int(sys.argv[3]))
    elif mode == "per_client":
        check_per_client(port, int(sys.argv[3]))
    elif mode == "busy":
        check_busy(port, int(sys.argv[3]))
    elif mode == "crowd":
        check_crowd(port, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        fail("unknown mode " + mode)
