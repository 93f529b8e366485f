# Shared by tests/e2e/serve*.sh (sourced): a tiny random K3-architecture model with a byte-level
# tokenizer (256 byte ranks + 256 reserved ids = the model's 512; K3 or Qwen3 specials, the chat
# end marker on the model's eos id 509), and a server started on a free loopback port.
# Needs: $sluice (binary). Sourcing makes the scratch dir $work and a trap that kills every server
# start_server started and removes $work when the script exits.
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# The system interpreter: a version-manager shim costs a second per call on a busy machine.
python3() { if [ -x /usr/bin/python3 ]; then /usr/bin/python3 "$@"; else command python3 "$@"; fi; }

# make_model DIR k3|qwen3
make_model() {
  local dir=$1 format=$2
  "$sluice" make-tiny --arch kimi_k3 --out "$dir" 2>/dev/null || fail "make-tiny"
  python3 - "$dir" "$format" <<'PY'
import base64, json, sys
d, fmt = sys.argv[1], sys.argv[2]
with open(d + "/tiktoken.model", "w") as f:
    for b in range(256):
        f.write(base64.b64encode(bytes([b])).decode() + " " + str(b) + "\n")
if fmt == "k3":
    specials = {256: "[BOS]", 257: "[EOS]", 258: "<|open|>", 259: "<|close|>", 260: "<|sep|>", 509: "<|end_of_msg|>"}
else:
    specials = {258: "<|im_start|>", 259: "<think>", 260: "</think>", 261: "<tool_call>", 262: "</tool_call>",
                509: "<|im_end|>"}
json.dump({"added_tokens_decoder": {str(k): {"content": v, "special": True} for k, v in specials.items()}},
          open(d + "/tokenizer_config.json", "w"))
PY
}

# start_server NAME ARGS...: sets ${NAME}_pid and ${NAME}_url; the log is $work/NAME.log.
start_server() {
  local name=$1
  shift
  # The log exists before the server starts: reading it must not race the background redirect
  # (a failed sed under `set -e` would end the script and leave the server running).
  : >"$work/$name.log"
  "$sluice" serve --port 0 "$@" 2>"$work/$name.log" &
  local pid=$!
  pids+=("$pid")
  local port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/$name.log" | head -1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "server $name exited: $(cat "$work/$name.log")"
    sleep 0.1
  done
  [ -n "$port" ] || { kill -KILL "$pid" 2>/dev/null; fail "server $name did not start: $(cat "$work/$name.log")"; }
  printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_url" '%s' "http://127.0.0.1:$port"
}

stop_server() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  fail "server $pid did not stop within 10 s of SIGTERM"
}

# chat URL OUT MESSAGES-JSON [MAX-TOKENS]: a greedy chat turn (12 tokens by default), thinking off;
# the response in OUT, any status but 200 a failure.
chat() {
  local body code
  body=$(python3 -c "import json,sys; print(json.dumps({'model':'m','messages':json.loads(sys.argv[1]),'max_tokens':int(sys.argv[2]),
'temperature':0,'reasoning_effort':'none'}))" "$3" "${4:-12}")
  code=$(curl -s -o "$2" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$body" "$1/v1/chat/completions")
  [ "$code" = 200 ] || fail "chat: HTTP $code $(cat "$2")"
}
# field FILE EXPR: EXPR (Python, over the JSON as j) of a response file.
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
cached() { field "$1" "j['usage']['prompt_tokens_details']['cached_tokens']"; }
content() { field "$1" "json.dumps(j['choices'][0]['message']['content'])"; }
