"""Slow-client checks against a running `sluice serve` (loopback only; every socket has a timeout
and the whole run ends by itself within about 15 s).

  slowloris.py health PORT N HEADER_TIMEOUT
      Opens N connections (half idle, half trickling a header line every 0.3 s), then measures
      GET /health latency several times while they are held; prints the worst latency and fails
      when it exceeds 1 s. Then checks that every trickling connection was cut off within
      HEADER_TIMEOUT + 2 s of opening although it kept sending (the deadline is not reset by each
      line), with a 408.
  slowloris.py cap PORT CAP
      Holds CAP idle connections, then checks that one more gets a 503 within 1 s.
"""
import json
import socket
import sys
import time

HOST = "127.0.0.1"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def connect(port):
    s = socket.create_connection((HOST, port), timeout=5)
    s.settimeout(5)
    return s


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


def check_health(port, n, header_timeout):
    idle, trickling = [], []
    opened = time.monotonic()
    for i in range(n):
        s = connect(port)
        if i % 2:
            s.sendall(b"GET /health HTTP/1.1\r\n")
            trickling.append(s)
        else:
            idle.append(s)
    worst = 0.0
    end = opened + max(2.0, header_timeout - 0.5)
    line = 0
    while time.monotonic() < end:
        for s in trickling:
            try:
                s.sendall(b"X-Slow-%d: y\r\n" % line)
            except OSError:
                pass  # cut off already; counted below
        line += 1
        worst = max(worst, health_latency(port))
        time.sleep(0.3)
    print("health latency under %d slow connections: worst %.3f s" % (n, worst))
    if worst > 1.0:
        fail("/health took %.3f s (limit 1 s) with %d slow connections open" % (worst, n))
    # Keep trickling: the server must still end each trickling connection by its header deadline.
    deadline = opened + header_timeout + 2.0
    answers = {}
    while time.monotonic() < deadline and len(answers) < len(trickling):
        for s in trickling:
            if s in answers:
                continue
            try:
                s.sendall(b"X-Slow: y\r\n")
            except OSError:
                pass
            s.settimeout(0.01)
            try:
                chunk = s.recv(4096)
                answers[s] = chunk
            except socket.timeout:
                pass
            except ConnectionResetError:
                answers[s] = b""
        time.sleep(0.2)
    if len(answers) < len(trickling):
        fail("%d of %d trickling connections were still open %.1f s after they opened (header timeout %d s)"
             % (len(trickling) - len(answers), len(trickling), header_timeout + 2.0, header_timeout))
    timed_out = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 408"))
    if timed_out < len(trickling) // 2:
        fail("only %d of %d trickling connections got a 408: %r" % (timed_out, len(trickling),
                                                                     list(answers.values())[:3]))
    for s in idle + trickling:
        s.close()
    print("trickling connections cut off at the header deadline: %d (%d with 408)" % (len(answers), timed_out))


def check_cap(port, cap):
    held = [connect(port) for _ in range(cap)]
    time.sleep(0.3)  # the server has accepted them all
    start = time.monotonic()
    extra = connect(port)
    extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    data = read_all(extra, start + 1.0)
    took = time.monotonic() - start
    if data is None:
        fail("connection %d (over --max-connections %d) was not answered within 1 s" % (cap + 1, cap))
    if not data.startswith(b"HTTP/1.1 503"):
        fail("connection over the cap got: %r" % data[:200])
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    if body["error"]["code"] != "too_many_connections":
        fail("503 body: %r" % body)
    print("connection over the cap of %d: 503 in %.3f s" % (cap, took))
    for s in held:
        s.close()
    extra.close()


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "health":
        check_health(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "cap":
        check_cap(port, int(sys.argv[3]))
    else:
        fail("unknown mode " + mode)
