#!/usr/bin/env bash
# End-to-end: `sluice serve` on the default tiny model stops a long prefill within a layer. A
# client that sends a prompt of several thousand tokens and disconnects frees the generation slot
# at once: a short request queued behind it is answered long before that prefill could have
# ended, with exactly the tokens a fresh server gives. SIGTERM during a long prefill ends the
# server within a few seconds. Usage: serve_cancel.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
model="$src/models/default/target"

# A prompt of about 6,000 tokens: its prefill takes tens of seconds on this model (a `sluice run`
# of 6,000 positions takes ~30 s on 2 cores); every check below is far below that.
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
words = ["river", "stone", "light", "quiet", "garden", "market", "winter", "letter", "silver", "morning"]
text = " ".join(f"{words[(i * 7 + i // 5) % 10]}{i % 97}" for i in range(2000))
json.dump({"model": "tiny", "prompt": text, "max_tokens": 4, "temperature": 0}, open(w + "/long.json", "w"))
json.dump({"model": "tiny", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "ignore_eos": True},
          open(w + "/short.json", "w"))
PY

# --queue 1: the short request waits for the long one's slot instead of getting a 429.
start_server srv --model "$model" --model-id tiny --queue 1
port=${srv_url##*:}
short() {  # OUT-FILE: the short completion, in at most 20 s
  curl -s --max-time 20 -o "$1" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$work/short.json" "$srv_url/v1/completions"
}
text_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'][0]['text'])" "$1"; }
generating() { curl -s "$srv_url/health" | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['generating'] else 1)"; }

code=$(short "$work/fresh.json")
[ "$code" = 200 ] || fail "short request on a fresh server: HTTP $code $(cat "$work/fresh.json")"
prompt_tokens=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['usage']['prompt_tokens'])" "$work/fresh.json")

# The long prompt, its client closing the connection as soon as the request is sent: an end of
# stream that comes with the request looks like a half-close, and the server tells the two apart
# by the reset that its interim 100 Continue meets (connection_probe.h).
python3 - "$port" "$work/long.json" <<'PY' || fail "long request could not be sent"
import socket, sys
port, body = int(sys.argv[1]), open(sys.argv[2], "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
s.close()
PY
t0=$(date +%s.%N)
code=$(short "$work/after.json")
t1=$(date +%s.%N)
[ "$code" = 200 ] || fail "short request after the disconnect: HTTP $code (still waiting for the long prefill?)"
[ "$(text_of "$work/after.json")" = "$(text_of "$work/fresh.json")" ] ||
  fail "after a cancelled prefill the short request differs from a fresh server's: $(cat "$work/after.json")"
grep -Eq '"POST /v1/completions" 499 ' "$work/srv.log" || fail "no 499 log line for the disconnected client"
waited=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
# The long prefill alone takes about 10 s here (more under a sanitizer).
python3 -c "import sys; sys.exit(0 if $waited < 5 else 1)" || fail "the short request waited $waited s (want < 5)"
echo "ok   short request answered ${waited} s after the long prompt's client left, same text as a fresh server"

# The long prompt again, its client staying; SIGTERM once it is prefilling.
curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary @"$work/long.json" \
  "$srv_url/v1/completions" >"$work/term.json" 2>/dev/null &
curl_pid=$!
for _ in $(seq 1 100); do generating && break; sleep 0.05; done
generating || fail "the long prompt never showed as generating"
sleep 0.3  # inside the prefill (tens of seconds), not at its start
t0=$(date +%s.%N)
kill -TERM "$srv_pid"
stopped=0
for _ in $(seq 1 100); do  # up to 10 s
  kill -0 "$srv_pid" 2>/dev/null || { stopped=1; break; }
  sleep 0.05
done
t1=$(date +%s.%N)
[ "$stopped" = 1 ] || fail "the server did not stop within 10 s of SIGTERM during a long prefill"
status=0
wait "$srv_pid" || status=$?
[ "$status" = 0 ] || fail "exit status after SIGTERM: $status ($(tail -3 "$work/srv.log"))"
took=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
python3 -c "import sys; sys.exit(0 if $took < 5 else 1)" || fail "SIGTERM during a prefill took $took s (want < 5)"
wait "$curl_pid" || true
grep -q 'shutting_down' "$work/term.json" || fail "the long request was not answered 503 shutting_down: $(head -c 300 "$work/term.json")"
echo "ok   SIGTERM during a long prefill: exited after ${took} s"
echo "serve_cancel: all checks passed (prompt of the short request: $prompt_tokens tokens)"
