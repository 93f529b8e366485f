#!/usr/bin/env bash
# End-to-end: `sluice serve` over raw HTTP (curl) on a tiny random model: routes with and without
# /v1, JSON and SSE framing, greedy determinism, OpenAI-shaped errors (malformed JSON, wrong types,
# unknown fields and routes, huge bodies, API key), 429 beyond the queue, client disconnects that
# cancel their generation, Qwen3 chat, /v1/messages framing and errors, the web chat's files, capped
# telemetry streams, and a graceful SIGTERM that ends every stream.
# Usage: serve_http.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }

make_model "$work/tiny" k3
make_model "$work/qwen" qwen3
start_server k3 --model "$work/tiny" --model-id tiny --queue 0 --max-request-bytes 65536 --api-key sekret
# wait_idle WHY: the k3 server stops generating within 2 s, else fail naming WHY.
wait_idle() {
  for _ in $(seq 1 40); do
    curl -s "$k3_url/health" | python3 -c "import json,sys; sys.exit(1 if json.load(sys.stdin)['generating'] else 0)" && return 0
    sleep 0.05
  done
  fail "generation went on after $1"
}
auth=(-H "Authorization: Bearer sekret")

# post PATH BODY -> sets $code; body in $work/out.json
post() {
  code=$(curl -s -o "$work/out.json" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
    --data-binary "$2" "$k3_url$1")
}
# jcheck PYTHON-EXPR: evaluated with j = the last response body
jcheck() {
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$work/out.json" ||
    fail "check '$1' failed on: $(head -c 600 "$work/out.json")"
}
expect_error() {  # STATUS PARAM CODE (PARAM/CODE may be None)
  [ "$code" = "$1" ] || fail "expected HTTP $1, got $code: $(head -c 400 "$work/out.json")"
  jcheck "set(j) == {'error'} and set(j['error']) == {'message','type','param','code'} and j['error']['message']"
  jcheck "j['error']['param'] == $2 and j['error']['code'] == $3"
}

# Health needs no key; everything else does.
code=$(curl -s -o "$work/out.json" -w '%{http_code}' "$k3_url/health")
[ "$code" = 200 ] || fail "health: $code"
jcheck "j['status'] == 'ok' and j['model'] == 'tiny'"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' "$k3_url/v1/models")
expect_error 401 None "'invalid_api_key'"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' -H "Authorization: Bearer wrong" "$k3_url/v1/models")
expect_error 401 None "'invalid_api_key'"
for path in /v1/models /models; do
  code=$(curl -s -o "$work/out.json" -w '%{http_code}' "${auth[@]}" "$k3_url$path")
  [ "$code" = 200 ] || fail "$path: $code"
  jcheck "j['object'] == 'list' and [m['id'] for m in j['data']] == ['tiny']"
done

# Completions: JSON, greedy determinism, with and without /v1.
req='{"model":"tiny","prompt":"Once upon a time","max_tokens":12,"temperature":0}'
post /v1/completions "$req"
[ "$code" = 200 ] || fail "completions: $code $(cat "$work/out.json")"
jcheck "j['object'] == 'text_completion' and j['id'].startswith('cmpl-') and len(j['choices']) == 1"
jcheck "j['choices'][0]['finish_reason'] in ('stop','length') and j['usage']['prompt_tokens'] == 16"
jcheck "j['usage']['completion_tokens'] <= 12 and j['usage']['total_tokens'] == 16 + j['usage']['completion_tokens']"
cp "$work/out.json" "$work/first.json"
post /completions "$req"
[ "$code" = 200 ] || fail "/completions: $code"
python3 -c "import json,sys; a,b=(json.load(open(f))['choices'][0]['text'] for f in sys.argv[1:]); sys.exit(a!=b)" \
  "$work/first.json" "$work/out.json" || fail "greedy completions differ between identical requests"

# Chat without /v1, thinking on and off.
post /chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}'
[ "$code" = 200 ] || fail "chat: $code $(cat "$work/out.json")"
jcheck "j['object'] == 'chat.completion' and j['choices'][0]['message']['role'] == 'assistant'"
post /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"reasoning_effort":"none"}'
[ "$code" = 200 ] || fail "chat thinking off: $code"
jcheck "'reasoning_content' not in j['choices'][0]['message']"

# SSE: data lines, one role chunk first, a finish_reason, usage, [DONE] last.
curl -s -N "${auth[@]}" -H 'Content-Type: application/json' -o "$work/sse.txt" --data-binary \
  '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' \
  "$k3_url/v1/chat/completions"
python3 - "$work/sse.txt" <<'PY' || fail "SSE framing: $(head -c 800 "$work/sse.txt")"
import json, sys
raw = open(sys.argv[1]).read()
events = raw.split("\n\n")
assert events[-1] == "", "stream must end with a blank line"
events = [e for e in events[:-1] if not e.startswith(":")]  # comments: a keep-alive on a slow machine
assert all(e.startswith("data: ") and "\n" not in e for e in events), events
assert events[-1] == "data: [DONE]"
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] in ("stop", "length")
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] <= 6
assert len({c["id"] for c in chunks}) == 1
PY

# Errors before inference: OpenAI-shaped, naming the field.
post /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}'
expect_error 400 None "'invalid_json'"
post /v1/chat/completions '[1,2,3]'
expect_error 400 None "'invalid_json'"
post /v1/chat/completions '{"model":"tiny","messages":"hi"}'
expect_error 400 "'messages'" "'invalid_type'"
post /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}'
expect_error 400 "'max_tokens'" "'invalid_type'"
post /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"temperature":5}'
expect_error 400 "'temperature'" "'invalid_value'"
post /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"best_of":2}'
expect_error 400 "'best_of'" "'unknown_parameter'"
post /v1/completions '{"model":"tiny","prompt":"x","n":3}'
expect_error 400 "'n'" "'unsupported_value'"
post /v1/completions '{"model":"other","prompt":"x"}'
expect_error 404 "'model'" "'model_not_found'"
post /v1/embeddings '{"model":"tiny","input":"x"}'
expect_error 404 None "'unknown_url'"
head -c 70000 /dev/zero | tr '\0' 'a' >"$work/big.txt"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
  --data-binary @"$work/big.txt" "$k3_url/v1/completions")
expect_error 413 None "'request_too_large'"
python3 -c "print('{\"model\":\"tiny\",\"prompt\":\"' + 'ab' * 20000 + '\",\"max_tokens\":1}')" >"$work/long.json"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
  --data-binary @"$work/long.json" "$k3_url/v1/completions")
expect_error 400 "'prompt'" "'context_length_exceeded'"  # 40,000 byte tokens > the 32,768 context

# One generation at a time (--queue 0): a second request gets 429 while a long stream runs; the
# streaming client then disconnects and its generation stops (health shows nothing running).
long='{"model":"tiny","prompt":"a","max_tokens":30000,"stream":true,"temperature":0,"ignore_eos":true}'
curl -s -N "${auth[@]}" --max-time 3 --data-binary "$long" "$k3_url/v1/completions" >"$work/long_sse.txt" 2>/dev/null &
curl_pid=$!
busy=0
for _ in $(seq 1 50); do
  code=$(curl -s -o "$work/h.json" -w '%{http_code}' "$k3_url/health")
  if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['generating'] else 1)" "$work/h.json"; then
    busy=1; break
  fi
  sleep 0.05
done
[ "$busy" = 1 ] || fail "the long stream never showed as generating"
post /v1/completions '{"model":"tiny","prompt":"x","max_tokens":1}'
expect_error 429 None "'rate_limit_exceeded'"
before=$(curl -s "$k3_url/health" | python3 -c "import json,sys; print(json.load(sys.stdin)['completed'])")
wait "$curl_pid" || true
grep -q '^data: {' "$work/long_sse.txt" || fail "the long stream sent no chunk before the disconnect"
wait_idle "its streaming client disconnected"
after=$(curl -s "$k3_url/health" | python3 -c "import json,sys; print(json.load(sys.stdin)['completed'])")
[ "$before" = "$after" ] || fail "a cancelled generation was counted as completed ($before -> $after)"
# The same for a non-streaming client.
curl -s "${auth[@]}" --max-time 1 --data-binary '{"model":"tiny","prompt":"a","max_tokens":30000,"ignore_eos":true}' \
  "$k3_url/v1/completions" >/dev/null 2>&1 || true
wait_idle "its non-streaming client disconnected"
post /v1/completions "$req"
[ "$code" = 200 ] || fail "request after disconnects: $code"

# Qwen3 ChatML: a qwen3-format tokenizer serves chat with the same API.
start_server qwen --model "$work/qwen" --model-id qwen-tiny
code=$(curl -s -o "$work/out.json" -w '%{http_code}' --data-binary \
  '{"model":"qwen-tiny","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0}' \
  "$qwen_url/v1/chat/completions")
[ "$code" = 200 ] || fail "qwen3 chat: $code $(cat "$work/out.json")"
jcheck "j['choices'][0]['message']['role'] == 'assistant' and j['usage']['prompt_tokens'] > 20"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' --data-binary \
  '{"model":"qwen-tiny","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}' "$qwen_url/v1/chat/completions")
expect_error 400 "'reasoning_effort'" "'unsupported_value'"
stop_server "$qwen_pid"

# Anthropic's route over raw HTTP: the key as x-api-key, named SSE events whose data's type is the
# event's name, message_start first and message_stop last; Anthropic-shaped errors on that route.
curl -s -N -H 'x-api-key: sekret' -o "$work/msg_sse.txt" --data-binary \
  '{"model":"tiny","max_tokens":6,"messages":[{"role":"user","content":"hi"}],"temperature":0,"stream":true}' \
  "$k3_url/v1/messages"
python3 - "$work/msg_sse.txt" <<'PY' || fail "messages stream framing: $(head -c 600 "$work/msg_sse.txt")"
import json, sys
blocks = [b for b in open(sys.argv[1]).read().split("\n\n") if b and not b.startswith(":")]
names = []
for b in blocks:
    event, data = b.split("\n")
    assert event.startswith("event: ") and data.startswith("data: "), b
    assert json.loads(data[6:])["type"] == event[7:], b
    names.append(event[7:])
assert names[0] == "message_start" and names[-2] == "message_delta" and names[-1] == "message_stop", names
PY
code=$(curl -s -o "$work/out.json" -w '%{http_code}' --data-binary '{}' "$k3_url/v1/messages")
[ "$code" = 401 ] || fail "messages without a key: $code"
jcheck "j == {'type': 'error', 'error': {'type': 'authentication_error', 'message': j['error']['message']}}"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' -H 'x-api-key: sekret' --data-binary \
  '{"model":"gpt","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}' "$k3_url/v1/messages")
[ "$code" = 404 ] || fail "messages with another model: $code"
jcheck "j['type'] == 'error' and j['error']['type'] == 'not_found_error'"
code=$(curl -s -o "$work/out.json" -w '%{http_code}' -H 'x-api-key: sekret' --data-binary \
  '{"model":"tiny","messages":[{"role":"user","content":"hi"}]}' "$k3_url/v1/messages")
[ "$code" = 400 ] || fail "messages without max_tokens: $code"
jcheck "j['error']['type'] == 'invalid_request_error' and j['error']['message'].startswith('max_tokens:')"
# The web chat's files need no key and load nothing from elsewhere; the API behind them does.
code=$(curl -s -D "$work/page_headers.txt" -o "$work/page.html" -w '%{http_code}' "$k3_url/")
[ "$code" = 200 ] || fail "GET /: $code"
grep -qi "^content-security-policy: default-src 'none'" "$work/page_headers.txt" || fail "GET / has no CSP"
grep -q '/web/chat.js' "$work/page.html" || fail "the page does not load its script"
! grep -Eq 'https?://' "$work/page.html" || fail "the page names another origin"
code=$(curl -s -o /dev/null -w '%{http_code}' "$k3_url/web/chat.js")
[ "$code" = 200 ] || fail "GET /web/chat.js: $code"

# Telemetry: one event at once and then every second; at most --telemetry-streams (4) at once, the
# fifth is refused; open streams end when the server shuts down (below).
tpids=()
for i in 1 2 3 4; do
  curl -s -N "${auth[@]}" --max-time 60 "$k3_url/v1/telemetry" >"$work/telemetry$i.txt" 2>/dev/null &
  tpids+=($!)
done
for _ in $(seq 1 50); do
  [ "$(grep -c '^data: ' "$work/telemetry4.txt" 2>/dev/null)" -ge 1 ] && break
  sleep 0.1
done
code=$(curl -s -o "$work/out.json" -w '%{http_code}' "${auth[@]}" "$k3_url/v1/telemetry")
expect_error 429 None "'too_many_telemetry_streams'"
sleep 1.2
python3 - "$work/telemetry1.txt" <<'PY' || fail "telemetry events: $(head -c 600 "$work/telemetry1.txt")"
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
assert len(events) >= 2, events
e = events[-1]
assert e["telemetry_streams"] == 4 and e["queue_depth"] == 0 and e["streaming"] is False, e
assert {"tokens_per_second", "cache", "drives", "read_bytes_per_second", "waiting"} <= set(e), e
PY

# Graceful stop: SIGTERM during a stream ends it (and the telemetry streams) and the process exits 0.
curl -s -N "${auth[@]}" --max-time 10 --data-binary "$long" "$k3_url/v1/completions" >"$work/term_sse.txt" 2>/dev/null &
curl_pid=$!
sleep 0.5
kill -TERM "$k3_pid"
term_at=$(date +%s)
status=0
wait "$k3_pid" || status=$?
[ "$status" = 0 ] || fail "server exit status after SIGTERM: $status ($(tail -3 "$work/k3.log"))"
[ $(( $(date +%s) - term_at )) -le 8 ] || fail "the server took more than 8 s to stop with telemetry streams open"
wait "$curl_pid" || true
for p in "${tpids[@]}"; do wait "$p" || true; done
grep -q 'shutting_down' "$work/term_sse.txt" || fail "the running stream was not told about the shutdown"
grep -q 'stopped after' "$work/k3.log" || fail "no shutdown line in the log"
echo "serve_http: all checks passed"
