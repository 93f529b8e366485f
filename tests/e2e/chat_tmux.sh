#!/usr/bin/env bash
# `sluice chat` on the default tiny model, driven in a real terminal under tmux (send-keys,
# capture-pane): two turns (the second typed over two lines with a trailing backslash, continuing
# from the first turn's state), /stats, /system, /save and the file it writes, /reset, Ctrl-C
# during a long reply (the chat stays), Ctrl-C at the prompt, line editing (Up/Down through the
# lines entered, Ctrl-U, backspace), Ctrl-D and /quit; reasoning dimmed
# on the terminal and not under NO_COLOR or through a pipe; `sluice run`'s prefill progress drawn
# in place on a terminal and cleared. Usage: chat_tmux.sh <sluice> <source-dir>
set -euo pipefail
sluice=$1
model="$2/models/default/target"
command -v tmux >/dev/null || { echo "chat_tmux: FAIL: tmux is not installed (scripts/install-deps.sh installs it)"; exit 1; }
work=$(mktemp -d)
sock="sluice-chat-test-$$"
tm() { tmux -L "$sock" -f /dev/null "$@"; }  # no user config: the panes are what the test expects
trap 'tm kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "chat_tmux: FAIL: $*" >&2; exit 1; }
export TERM=${TERM:-xterm}
[ "$TERM" = dumb ] && export TERM=xterm

# The pane's text (wrapped lines joined, trailing spaces dropped); -e keeps the styles.
pane() { tm capture-pane -p -J -S -2000 -t "$1" "${@:2}" | sed 's/[[:space:]]*$//'; }
# The pane's last non-empty line.
last_line() { pane "$1" | grep -v '^[[:space:]]*$' | tail -n 1 || true; }
# Waits (up to 60 s) until the pane shows a line matching the regex $2.
wait_for() {
  for _ in $(seq 600); do
    pane "$1" | grep -Eq -- "$2" && return 0
    sleep 0.1
  done
  fail "$1: never showed /$2/; the pane ends with:
$(pane "$1" | grep . | tail -n 20)"
}
# Waits until the chat is back at its prompt (the last line is an empty "> ").
# Waits (up to 60 s) until the pane shows $3 lines matching the regex $2.
wait_count() {
  for _ in $(seq 600); do
    [ "$(pane "$1" | grep -Ec -- "$2" || true)" -ge "$3" ] && return 0
    sleep 0.1
  done
  fail "$1: never showed $3 lines /$2/; the pane ends with:
$(pane "$1" | grep . | tail -n 20)"
}
wait_prompt() {
  for _ in $(seq 600); do
    [ "$(last_line "$1")" = ">" ] && return 0
    sleep 0.1
  done
  fail "$1: no prompt; the pane ends with:
$(pane "$1" | grep . | tail -n 20)"
}
# Starts `sluice chat` with the given flags in a 160x50 pane named $1; the pane stays after it
# exits and shows its exit status.
start_chat() {
  local name=$1
  shift
  tm new-session -d -s "$name" -x 160 -y 50 \
    "$(printf '%q ' "$sluice" chat --model "$model" "$@"); echo \"chat exited: \$?\"; sleep 600"
  wait_prompt "$name"
}
# Types a message and waits for the reply to end (the typed line echoed after "> " or "... ",
# then a fresh prompt).
say() {
  tm send-keys -t "$1" -l -- "$2"
  tm send-keys -t "$1" Enter
  local echoed=0
  for _ in $(seq 600); do
    pane "$1" | grep -Fxq -e "> $2" -e "... $2" && { echoed=1; break; }
    sleep 0.1
  done
  [ $echoed -eq 1 ] || fail "$1: '$2' was not echoed: $(pane "$1" | grep . | tail -n 5)"
  wait_prompt "$1"
}
stats_field() {  # pane, regex with one group, the last /stats block's value
  pane "$1" | sed -nE "s|$2|\1|p" | tail -n 1
}

# 1. Two turns, /stats, /system, /save, /reset.
start_chat a --max-tokens 24
pane a | grep -q "^sluice chat: .*chat format kimi_k3" || fail "no banner: $(pane a)"
say a "Hello there"
pane a -e | grep -q $'\e\\[2m' || fail "the reasoning is not dimmed on a terminal"
# Turn 2 over two lines: the first ends in a backslash, the prompt shows "...".
tm send-keys -t a -l -- 'What is your name?\'
tm send-keys -t a Enter
wait_for a '^\.\.\.$'
say a "Tell me."
tm send-keys -t a -l "/stats"
tm send-keys -t a Enter
wait_for a "^  experts  "
prompt_tokens=$(stats_field a '^  prompt   ([0-9]+) tokens.*')
reused=$(stats_field a '^  prompt   [0-9]+ tokens, ([0-9]+) reused.*')
ttft=$(stats_field a '^  TTFT     ([0-9.]+) ms$')
rate=$(stats_field a '^  decode   ([0-9.]+) tok/s.*')
[ -n "$ttft" ] && [ -n "$rate" ] || fail "/stats lacks TTFT or tok/s: $(pane a | tail -n 8)"
pane a | grep -q "^  drafts   none (--draft off)" || fail "/stats lacks the drafts line"
pane a | grep -q "^  experts  0 bytes read (resident" || fail "/stats lacks the expert bytes line"
# The second turn continued from the first one's state: only the new part was prefilled.
[ "$reused" -gt 0 ] && [ "$reused" -lt "$prompt_tokens" ] ||
  fail "turn 2 reused $reused of $prompt_tokens prompt tokens (want some, from turn 1's state)"
echo "ok   two turns, /stats: TTFT $ttft ms, $rate tok/s, $reused of $prompt_tokens prompt tokens reused"

tm send-keys -t a -l "/save $work/chat.json"
tm send-keys -t a Enter
wait_for a "^\(saved 4 messages to "
python3 - "$work/chat.json" <<'PY' || fail "/save wrote $(cat "$work/chat.json")"
import json, sys
j = json.load(open(sys.argv[1]))
m = j["messages"]
assert j["model"] == "target", j["model"]
assert [x["role"] for x in m] == ["user", "assistant", "user", "assistant"], m
assert m[0]["content"] == "Hello there", m[0]
assert m[2]["content"] == "What is your name?\nTell me.", m[2]
assert all(x["content"] or x.get("reasoning_content") for x in m[1::2]), m
PY
[ "$(find "$work" -name 'chat.json.tmp*' | wc -l)" -eq 0 ] || fail "/save left a temporary file"
echo "ok   /save: OpenAI-shaped JSON, the two-line message joined by a newline"

tm send-keys -t a -l "/reset"
tm send-keys -t a Enter
wait_for a "^\(conversation cleared\)"
tm send-keys -t a -l "/system You are terse."
tm send-keys -t a Enter
wait_for a "^\(system prompt set"
say a "Hi again"
tm send-keys -t a -l "/stats"
tm send-keys -t a Enter
wait_prompt a
[ "$(stats_field a '^  prompt   [0-9]+ tokens, ([0-9]+) reused.*')" = 0 ] || fail "after /reset a turn reused state"
tm send-keys -t a -l "/save $work/chat2.json"
tm send-keys -t a Enter
wait_for a "^\(saved 3 messages to "
python3 - "$work/chat2.json" <<'PY' || fail "/save after /reset: $(cat "$work/chat2.json")"
import json, sys
m = json.load(open(sys.argv[1]))["messages"]
assert [x["role"] for x in m] == ["system", "user", "assistant"], m
assert m[0]["content"] == "You are terse." and m[1]["content"] == "Hi again", m
PY
echo "ok   /reset forgets the turns and the state, /system leads the next render"
tm send-keys -t a C-d
wait_for a "^chat exited: 0$"
echo "ok   Ctrl-D leaves (exit 0)"

# 2. Ctrl-C during a long reply stops it and the chat goes on; Ctrl-C at the prompt drops the line;
# line editing and history.
start_chat b --max-tokens 1000000
tm send-keys -t b -l "Tell me a long story"
tm send-keys -t b Enter
wait_for b "^> Tell me a long story"
lines_before=$(pane b | grep -c . || true)
for _ in $(seq 600); do
  [ "$(pane b | grep -c . || true)" -ge $((lines_before + 3)) ] && break
  sleep 0.1
done
tm send-keys -t b C-c
start=$(date +%s)
wait_for b '^\[stopped\]$'
wait_prompt b
tm send-keys -t b -l "/stats"
tm send-keys -t b Enter
wait_for b "^last reply: [0-9]+ tokens, stop cancelled$"
generated=$(stats_field b '^last reply: ([0-9]+) tokens, stop cancelled$')
echo "ok   Ctrl-C stopped a reply after $generated tokens within $(( $(date +%s) - start )) s; the chat stays"
# The next turn continues the stopped reply's state (the partial reply stays in the conversation).
lines_before=$(pane b | grep -c . || true)
tm send-keys -t b -l "Go on"
tm send-keys -t b Enter
for _ in $(seq 600); do
  [ "$(pane b | grep -c . || true)" -ge $((lines_before + 3)) ] && break
  sleep 0.1
done
tm send-keys -t b C-c
wait_count b '^\[stopped\]$' 2
wait_prompt b
tm send-keys -t b -l "/stats"
tm send-keys -t b Enter
wait_count b "^last reply: [0-9]+ tokens, stop cancelled$" 2
wait_prompt b
reused=$(stats_field b '^  prompt   [0-9]+ tokens, ([0-9]+) reused.*')
[ "$reused" -gt "$generated" ] || fail "the turn after Ctrl-C reused $reused tokens (want the stopped turn's state)"
echo "ok   the turn after Ctrl-C reused $reused tokens of the stopped turn's state"
tm send-keys -t b -l "half a message"
tm send-keys -t b C-c
wait_prompt b
say b "/help"
pane b | grep -q "^  /save FILE" || fail "/help lacks /save"
echo "ok   Ctrl-C at the prompt drops the line; /help"
# Line editing: Up walks back through the lines entered (the dropped half line is not one of
# them), Down returns, Ctrl-U clears, backspace erases.
wait_line() {  # pane, the exact last line
  for _ in $(seq 100); do
    [ "$(last_line "$1")" = "$2" ] && return 0
    sleep 0.1
  done
  fail "$1: the last line is '$(last_line "$1")', not '$2'"
}
tm send-keys -t b Up
wait_line b "> /help"
tm send-keys -t b Up Up
wait_line b "> Go on"
tm send-keys -t b Up Up
wait_line b "> Tell me a long story"
tm send-keys -t b Down
wait_line b "> /stats"
tm send-keys -t b C-u
wait_line b ">"
tm send-keys -t b -l "/quix"
tm send-keys -t b BSpace
tm send-keys -t b -l "t"
tm send-keys -t b Enter
wait_for b "^chat exited: 0$"
echo "ok   Up/Down recall earlier lines, Ctrl-U clears, backspace erases; /quit leaves (exit 0)"

# 3. NO_COLOR: no styles on the terminal; the reasoning is marked by a header instead.
tm new-session -d -s c -x 160 -y 50 \
  "NO_COLOR=1 $(printf '%q ' "$sluice" chat --model "$model" --max-tokens 8); echo \"chat exited: \$?\"; sleep 600"
wait_prompt c
say c "Hello"
pane c -e | grep -q $'\e\\[2m' && fail "NO_COLOR: the reply is styled"
pane c | grep -q "^--- reasoning ---" || fail "NO_COLOR: no reasoning header"
echo "ok   NO_COLOR: no styles, a reasoning header"

# 4. Through pipes: no prompt, no banner, no escape sequences; the replies and commands' output only.
out=$(printf 'Hello\n/stats\n' | "$sluice" chat --model "$model" --max-tokens 8 2>"$work/pipe.err")
case "$out" in *$'\e'*) fail "piped chat output has escape sequences" ;; esac
case "$out" in "--- reasoning ---"*"last reply: "*" tokens, stop "*) ;; *) fail "piped chat: $out" ;; esac
# stderr carries nothing but the prefill's progress lines, which appear once a prefill has taken a
# second (a slow build: the sanitizers' took 1.1 s for this one).
grep -Ev '^sluice: prefill [0-9]+/[0-9]+ tokens' "$work/pipe.err" >"$work/pipe.other" || true
[ ! -s "$work/pipe.other" ] || fail "piped chat wrote to stderr: $(cat "$work/pipe.err")"
echo "ok   piped chat: plain replies, no prompt or styles"

# 5. `sluice run`'s prefill progress on a terminal: redrawn in place, then cleared. It shows once
# a prefill has run a second: the prompt grows until its prefill takes 1.5 s, so a faster machine
# still sees it.
for words in 1500 6000 24000; do
  python3 -c "
import random, sys
random.seed(1)
w = 'the lord said unto moses and behold i will go up make thee a burnt offering priest altar'.split()
print(' '.join(random.choice(w) for _ in range(int(sys.argv[1]))))" "$words" >"$work/long.txt"
  tm new-session -d -s "d$words" -x 160 -y 50 \
    "$(printf '%q ' "$sluice" run --model "$model" --prompt-file "$work/long.txt" --prefill-chunk 64 --max-new 2 \
      --stats); echo \"run exited: \$?\"; sleep 600"
  seen=
  for _ in $(seq 2400); do
    seen=$(pane "d$words" | grep -E -m 1 '^prefill [0-9]+/[0-9]+ tokens \([0-9]+%\)' || true)
    [ -n "$seen" ] && break
    pane "d$words" | grep -q '^run exited: ' && break
    sleep 0.05
  done
  wait_for "d$words" "^run exited: 0$"
  ms=$(pane "d$words" | sed -n 's/^\[stats\] prompt=[0-9]* cached=[0-9]* generated=[0-9]* prefill=\([0-9]*\).*/\1/p')
  if [ -z "$seen" ]; then
    [ "$ms" -lt 1500 ] || fail "no progress line during a prefill of $ms ms: $(pane "d$words" | grep .)"
    continue
  fi
  if pane "d$words" | grep -q '^prefill '; then fail "the progress line was not cleared: $(pane "d$words" | grep .)"; fi
  echo "ok   run on a terminal ($ms ms prefill): '$seen' drawn in place, then cleared"
  break
done
[ -n "$seen" ] || fail "no progress line on a terminal for any prompt"
echo "chat_tmux: all checks passed"
