#!/usr/bin/env bash
# End-to-end: drafting through text with a draft of another tokenizer (the trained Qwen3 draft
# models/default/draft-qwen3 on the default K3-architecture target) gives exactly the tokens of
# --draft off, through `sluice run` (plain and chat prompts, controller and fixed depths) and
# `sluice serve`; a draft that cannot be used is refused with one line naming why.
# Usage: draft_text.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
target="$src/models/default/target"
draft="$src/models/default/draft-qwen3"

ids() {  # ids ARGS... -> the generated ids of `sluice run --json ARGS`
  "$sluice" run --model "$target" --json "$@" 2>/dev/null |
    python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["generated_ids"])))'
}

checked=0
for prompt in "And God said, Let there be light: and there was light." "In the beginning" \
  "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures:"; do
  for chat in "" "--chat"; do
    off=$(ids --prompt "$prompt" $chat --max-new 48 --draft off)
    [ -n "$off" ] || fail "no tokens for '$prompt' $chat"
    for depth in "" "--draft-depth 1" "--draft-depth 4"; do
      on=$(ids --prompt "$prompt" $chat --max-new 48 --draft "model:$draft" $depth)
      [ "$on" = "$off" ] || fail "'$prompt' $chat $depth: drafting changed the tokens
off: $off
on:  $on"
      checked=$((checked + 1))
    done
  done
done
echo "ok   $checked runs with the qwen3 draft equal --draft off"

stats=$("$sluice" run --model "$target" --prompt "In the beginning God created" --max-new 32 \
  --draft "model:$draft" --draft-depth 3 --stats 2>&1 >/dev/null)
grep -q 'drafter=text' <<<"$stats" || fail "--stats does not name the text drafter: $stats"
grep 'drafter=text' <<<"$stats"

# A qwen3 draft without its tokenizer is refused, in one line that says why.
mkdir -p "$work/notok"
cp "$draft/config.json" "$draft/model.safetensors" "$work/notok/"
rc=0
err=$("$sluice" run --model "$target" --prompt "x" --max-new 2 --draft "model:$work/notok" 2>&1 >/dev/null) || rc=$?
[ "$rc" -eq 1 ] || fail "draft without tokenizer: exit $rc"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "error is not one line: $err"
case "$err" in *"notok: no tokenizer"*) ;; *) fail "error does not name the missing tokenizer: $err" ;; esac
echo "ok   refused: $err"

# The server builds the same drafter: greedy completions equal those of a server without one.
command -v curl >/dev/null || { echo "SKIP serve part: curl not installed"; exit 0; }
start_server plain --model "$target"
start_server drafted --model "$target" --draft "model:$draft"
req='{"model": "target", "prompt": "And God saw the light, that it was good", "max_tokens": 40, "temperature": 0}'
for name in plain drafted; do
  url_var="${name}_url"
  curl -s -H 'Content-Type: application/json' --data-binary "$req" "${!url_var}/v1/completions" >"$work/$name.json"
done
python3 - "$work/plain.json" "$work/drafted.json" <<'PY' || fail "serve: drafting changed the completion"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ta, tb = a["choices"][0]["text"], b["choices"][0]["text"]
assert ta and ta == tb, (ta, tb)
assert a["usage"]["completion_tokens"] == b["usage"]["completion_tokens"] == 40, (a["usage"], b["usage"])
PY
stop_server "$plain_pid"
stop_server "$drafted_pid"
echo "ok   serve --draft model:draft-qwen3 completes as without a draft"
