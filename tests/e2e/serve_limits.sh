#!/usr/bin/env bash
# End-to-end: `sluice serve` against hostile and careless clients on loopback: JSON nested far too
# deep (requests and config.json), 1,000 idle and 256 trickling connections (/health p99 within
# 100 ms, trickled headers cut off at the header deadline), the caps on connections, connections
# per client and requests on threads (a quick 503 each), a second server on a
# busy port, API keys from a file or the environment and empty ones refused, a half-closed client,
# the default max_tokens of chat, large request bodies in flight at once (429 past the budget,
# bounded memory), bad framing answered once and closed (Content-Length checked before any body
# byte, a body deadline), and one request log line per request.
# Usage: serve_limits.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
slow="$src/tests/e2e/serve/slowloris.py"

make_model "$work/tiny" k3
start_server k3 --model "$work/tiny" --model-id tiny --header-timeout 3 --default-max-tokens 5
port=${k3_url##*:}

post() {  # PATH BODY-FILE -> $code, body in $work/out.json
  code=$(curl -s -o "$work/out.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$2" "$k3_url$1")
}
jcheck() {
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$work/out.json" ||
    fail "check '$1' failed on: $(head -c 600 "$work/out.json")"
}

# JSON nested ~30,000 deep in a tool's parameters or ~50,000 deep in a response_format schema (about
# 60 KB each) used to overflow the stack and kill the server: now a 400 naming the depth limit.
python3 - "$work" <<'PY'
import sys
w = sys.argv[1]
deep = lambda n: "[" * n + "]" * n
msgs = '"messages":[{"role":"user","content":"hi"}]'
open(w + "/deep_tools.json", "w").write('{"model":"tiny",' + msgs + ',"tools":[{"type":"function","function":'
    '{"name":"f","parameters":{"type":"object","properties":{"a":' + deep(30000) + '}}}}]}')
open(w + "/deep_schema.json", "w").write('{"model":"tiny",' + msgs + ',"response_format":{"type":"json_schema",'
    '"json_schema":{"name":"s","schema":{"type":"object","properties":{"a":' + deep(50000) + '}}}}}')
open(w + "/deep_content.json", "w").write('{"model":"tiny","messages":[{"role":"user","content":' + deep(100000) + '}]}')
PY
for f in deep_tools deep_schema deep_content; do
  post /v1/chat/completions "$work/$f.json"
  [ "$code" = 400 ] || fail "$f: HTTP $code $(head -c 300 "$work/out.json")"
  jcheck "j['error']['code'] == 'invalid_json' and 'limit of 256 levels' in j['error']['message']"
done
curl -sf "$k3_url/health" >/dev/null || fail "the server died on deep JSON: $(tail -3 "$work/k3.log")"

# A config.json with a value nested 100,000 deep: one line naming the file and the limit, exit 1
# (the error message used to describe the value recursively: a stack overflow).
cp -r "$work/tiny" "$work/deep_cfg"
python3 - "$work/deep_cfg/config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["hidden_size"] = "DEEP"
open(sys.argv[1], "w").write(json.dumps(cfg).replace('"DEEP"', "[" * 100000 + "]" * 100000))
PY
status=0
"$sluice" serve --model "$work/deep_cfg" --port 0 2>"$work/deep_cfg.err" || status=$?
[ "$status" = 1 ] || fail "deep config.json: exit $status: $(head -c 300 "$work/deep_cfg.err")"
[ "$(wc -l <"$work/deep_cfg.err")" = 1 ] || fail "deep config.json: not one line: $(head -c 300 "$work/deep_cfg.err")"
grep -q 'config.json: JSON nested deeper than the limit of 256 levels' "$work/deep_cfg.err" ||
  fail "deep config.json: $(cat "$work/deep_cfg.err")"

# Chat without max_tokens stops at --default-max-tokens (5 here), not at the end of the context.
echo '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"ignore_eos":true}' >"$work/nomax.json"
post /v1/chat/completions "$work/nomax.json"
[ "$code" = 200 ] || fail "chat without max_tokens: $code $(head -c 300 "$work/out.json")"
jcheck "j['usage']['completion_tokens'] == 5 and j['choices'][0]['finish_reason'] == 'length'"
grep -q -- '--default-max-tokens INT:INT in 1..2147483647=4096' <<<"$("$sluice" serve --help)" || fail "--help lacks the chat default"

# A client that half-closes (shutdown(SHUT_WR)) right after its request still gets the response
# (after at most one interim 100 Continue).
python3 - "$port" <<'PY' || fail "half-closed client"
import json, socket, sys
body = b'{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}'
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
# The server may ask with one interim 100 Continue whether the client is still there.
interim = b"HTTP/1.1 100 Continue\r\n\r\n"
if data.startswith(interim):
    data = data[len(interim):]
head, _, payload = data.partition(b"\r\n\r\n")
if not head.startswith(b"HTTP/1.1 200"):
    sys.exit("half-closed client got: %r" % data[:300])
j = json.loads(payload)
assert j["object"] == "chat.completion" and j["usage"]["completion_tokens"] <= 3, j
PY

# One log line per request: client, method and path, status, bytes, duration.
grep -Eq '^sluice serve: 127\.0\.0\.1:[0-9]+ "POST /v1/chat/completions" 200 [0-9]+ B [0-9.]+ ms$' "$work/k3.log" ||
  fail "no request log line for the chat: $(tail -5 "$work/k3.log")"
grep -Eq '^sluice serve: 127\.0\.0\.1:[0-9]+ "POST /v1/chat/completions" 400 [0-9]+ B' "$work/k3.log" ||
  fail "no request log line for a 400"

# Slowloris: 1,000 idle and 256 trickling connections; /health p99 within 100 ms and a completion
# served while they are held, and each is cut off at the 3 s header deadline although it keeps
# sending lines, with one 408 at most.
python3 "$slow" crowd "$port" 1000 256 3 tiny

# A second server on the same port refuses to start with one line (no SO_REUSEPORT sharing).
status=0
timeout 60 "$sluice" serve --model "$work/tiny" --port "$port" 2>"$work/second.err" || status=$?
[ "$status" = 1 ] || fail "second server on a busy port: exit $status: $(tail -2 "$work/second.err")"
grep -q "cannot listen on 127.0.0.1:$port" "$work/second.err" || fail "busy port: $(cat "$work/second.err")"
[ "$(grep -c . "$work/second.err")" = 1 ] || fail "busy port: not one line: $(cat "$work/second.err")"
stop_server "$k3_pid"

# The caps: with 16 open from one address, the 17th from there gets a 503 at once (another address
# is served); with 24 open, the 25th gets a 503; with 16 requests on workers (headers in, bodies not),
# the 17th gets a 503 while /health is answered.
start_server capped --model "$work/tiny" --max-connections 24 --max-connections-per-client 16 --max-requests 16
python3 "$slow" per_client "${capped_url##*:}" 16
python3 "$slow" cap "${capped_url##*:}" 24
python3 "$slow" busy "${capped_url##*:}" 16
for why in 'connection refused: --max-connections)' 'connection refused: --max-connections-per-client)' \
  'request refused: --max-requests)'; do
  grep -qF -- "$why" "$work/capped.log" || fail "no log line for the 503 ($why)"
done
! grep -qF -- '"-" 503 0 B' "$work/capped.log" || fail "a 503 could not be sent: $(grep -F '503 0 B' "$work/capped.log")"
stop_server "$capped_pid"

# Large bodies in flight: eight 12 MB prompts at once against --max-request-bytes 16 MiB (so the
# bodies in flight may total 16 MiB: one large body at a time). The others are read away and
# answered 429 on a connection that stays usable; the peak resident size grows by far less than
# eight parsed prompts (each costs ~5x its size while parsed: ~480 MB for the eight), and it comes
# back down afterwards. Sanitizer builds keep freed memory (quarantine, shadow): no RSS check there.
start_server bodies --model "$work/tiny" --max-request-bytes 16777216
python3 - "${bodies_url##*:}" "$bodies_pid" "$(ldd "$sluice" | grep -c -E 'lib(a|t)san')" <<'PY' || fail "large bodies in flight; server log: $(tail -c 12000 "$work/bodies.log")"
import json, socket, sys, threading, time
port, pid, sanitized = int(sys.argv[1]), sys.argv[2], sys.argv[3] != "0"
def status_kb(key):
    for line in open("/proc/%s/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
base = status_kb("VmRSS")
body = json.dumps({"model": "tiny", "prompt": "river stone light " * (12_000_000 // 18), "max_tokens": 2}).encode()
results = []
def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    s.sendall(head % len(body) + body)
    f = s.makefile("rb")
    status = f.readline()
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    payload = json.loads(f.read(length))
    # The connection is still in step: a second request on it is answered.
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    again = f.readline()
    results.append((status.split()[1], payload["error"]["code"], again.split()[1]))
threads = [threading.Thread(target=one) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("bodies in flight:", sorted(results))
assert len(results) == 8, results
assert all(again == b"200" for _, _, again in results), results
assert all(code in (b"400", b"429") for code, _, _ in results), results
assert sum(code == b"429" for code, _, _ in results) >= 1, "no request was held back: " + str(results)
assert all(c == "rate_limit_exceeded" for code, c, _ in results if code == b"429"), results
peak, after = status_kb("VmHWM") - base, status_kb("VmRSS") - base
print("peak growth %d MB, after %d MB" % (peak // 1024, after // 1024))
if not sanitized:
    assert peak < 250_000, "peak resident size grew by %d MB" % (peak // 1024)
    assert after < 30_000, "resident size stayed %d MB up" % (after // 1024)
PY
grep -q '"POST /v1/completions" 429 ' "$work/bodies.log" || fail "no 429 log line for a held-back body"
stop_server "$bodies_pid"

# Bad framing is answered once and the connection closed: a Content-Length that is negative or not a
# number (400) or past --max-request-bytes (413, decided from the header: no body is read, so a
# 10 GB claim is answered at once), a malformed request line (400; the lines after it get no more
# answers), and a body trickled past --body-timeout (408).
start_server framing --model "$work/tiny" --model-id tiny --body-timeout 2 --max-request-bytes 1048576
python3 - "${framing_url##*:}" <<'PY' || fail "request framing; server log: $(tail -c 3000 "$work/framing.log")"
import socket, sys, time
port = int(sys.argv[1])

def exchange(data, pause=0.0, tail=b"", wait=10.0):
    """Sends data, then tail after `pause` seconds unless the server has closed the connection by
    then; reads until it closes. (responses, seconds from the first byte sent to the close)."""
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    s.sendall(data)
    got = b""
    def read_to_close(seconds):  # True once the server has closed
        nonlocal got
        s.settimeout(seconds)
        while True:
            b = s.recv(65536)
            if not b:
                return True
            got += b
    if pause:
        try:
            if read_to_close(pause):
                return got, time.monotonic() - t0
        except socket.timeout:
            pass
        try:
            s.sendall(tail)
        except OSError:
            pass
    try:
        read_to_close(wait)
    except socket.timeout:
        raise SystemExit(f"the connection stayed open after {got[:200]!r}")
    return got, time.monotonic() - t0

def status_lines(got):
    return [l for l in got.split(b"\r\n") if l.startswith(b"HTTP/1.1 ")]

head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
for length, want in [(b"-5", b"400"), (b"12abc", b"400"), (b"10000000000", b"413")]:
    got, dt = exchange(head + b"Content-Length: " + length + b"\r\n\r\n" + b"{" * 100)
    lines = status_lines(got)
    assert len(lines) == 1 and want in lines[0], (length, got[:300])
    assert dt < 2, f"Content-Length {length!r} answered after {dt:.1f} s"
got, _ = exchange(b"NONSENSE\r\n\r\n" + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
lines = status_lines(got)
assert len(lines) == 1 and b"400" in lines[0], got[:300]
body = b'{"model":"tiny","prompt":"hi","max_tokens":1}'
got, dt = exchange(head + b"Content-Length: %d\r\n\r\n" % len(body) + body[:5], pause=4.0, tail=body[5:])
lines = status_lines(got)
assert len(lines) == 1 and b"408" in lines[0], got[:300]
# Closed at the 2 s deadline, before the rest of the body would have come at 4 s.
assert 1.8 <= dt < 3.5, f"the trickled body was cut off after {dt:.1f} s, not at --body-timeout 2"
print("framing: one answer per bad connection, Content-Length checked first, body deadline kept")
PY
curl -sf "$framing_url/health" >/dev/null || fail "the server died on bad framing"
stop_server "$framing_pid"

# API keys: an empty one is a usage error (exit 2) wherever it comes from; a key file and
# SLUICE_API_KEY both work.
: >"$work/empty_key"
for opt in --api-key --api-key-file; do
  value=""
  [ "$opt" = --api-key-file ] && value="$work/empty_key"
  status=0
  "$sluice" serve --model "$work/tiny" --port 0 "$opt" "$value" 2>"$work/key.err" || status=$?
  [ "$status" = 2 ] || fail "serve $opt '$value': exit $status: $(cat "$work/key.err")"
  grep -q '^sluice serve: usage error: .*empty' "$work/key.err" || fail "serve $opt: $(cat "$work/key.err")"
done
status=0
SLUICE_API_KEY= "$sluice" serve --model "$work/tiny" --port 0 2>"$work/key.err" || status=$?
[ "$status" = 2 ] || fail "empty SLUICE_API_KEY: exit $status: $(cat "$work/key.err")"
printf 'filekey\n' >"$work/key"
start_server keyed --model "$work/tiny" --api-key-file "$work/key"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$keyed_url/v1/models")" = 401 ] || fail "key file: no key accepted"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer filekey' "$keyed_url/v1/models")" = 200 ] ||
  fail "key file: its key refused"
stop_server "$keyed_pid"
SLUICE_API_KEY=envkey start_server envkeyed --model "$work/tiny"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$envkeyed_url/v1/models")" = 401 ] || fail "SLUICE_API_KEY: no key accepted"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer envkey' "$envkeyed_url/v1/models")" = 200 ] ||
  fail "SLUICE_API_KEY: its key refused"
stop_server "$envkeyed_pid"
echo "serve_limits: all checks passed"
