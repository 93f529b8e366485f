#!/usr/bin/env bash
# End-to-end: `sluice serve --state-cache` on the default tiny model. A chat's first turn is saved;
# the server is restarted; the second turn restores the saved state (usage reports the cached
# tokens) and replies exactly as a cold server does. Entries that are corrupt (one byte flipped) or
# truncated are discarded with one warning line each and the reply is still the cold one; another
# model's entries in the same directory are left alone and never restored. A recurrent model's
# conversations that share only a system prompt resume after it, from the third on, across restarts.
# Usage: serve_state_cache.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
model="$src/models/default/target"
cache="$work/cache"

states() { find "$1" -name '*.state' | wc -l; }
warnings() { grep -c 'warning: state cache' "$1" || true; }

turn1='[{"role":"user","content":"Tell me a story about a fox."}]'
start_server a --model "$model" --model-id m --state-cache "$cache" --state-cache-gb 1
chat "$a_url" "$work/t1.json" "$turn1"
[ "$(cached "$work/t1.json")" = 0 ] || fail "first turn of a fresh cache reports cached tokens"
[ "$(states "$cache")" = 1 ] || fail "one state saved after the first turn, found $(states "$cache")"
stop_server "$a_pid"
reply1=$(content "$work/t1.json")
turn2=$(python3 -c "import json,sys; m=json.loads(sys.argv[1]); m += [{'role':'assistant','content':json.loads(sys.argv[2])},
{'role':'user','content':'And then what happened?'}]; print(json.dumps(m))" "$turn1" "$reply1")

# The cold reply to the second turn: a server without a cache.
start_server cold --model "$model" --model-id m
chat "$cold_url" "$work/cold.json" "$turn2"
[ "$(cached "$work/cold.json")" = 0 ] || fail "a cold server reports cached tokens"
stop_server "$cold_pid"

# Restarted: the second turn continues from the saved first turn (its prompt and reply, less the
# last, pending reply token).
cp -r "$cache" "$work/pristine"
start_server b --model "$model" --model-id m --state-cache "$cache" --state-cache-gb 1
chat "$b_url" "$work/t2.json" "$turn2"
want=$(( $(field "$work/t1.json" "j['usage']['prompt_tokens']") + $(field "$work/t1.json" "j['usage']['completion_tokens']") - 1 ))
[ "$(cached "$work/t2.json")" = "$want" ] || fail "restarted server: cached_tokens $(cached "$work/t2.json"), expected $want"
[ "$(content "$work/t2.json")" = "$(content "$work/cold.json")" ] ||
  fail "restored reply differs from the cold one: $(content "$work/t2.json") vs $(content "$work/cold.json")"
[ "$(field "$work/t2.json" "j['usage']['completion_tokens']")" = "$(field "$work/cold.json" "j['usage']['completion_tokens']")" ] ||
  fail "restored and cold replies have different token counts"
[ "$(warnings "$work/b.log")" = 0 ] || fail "warnings on a good cache: $(cat "$work/b.log")"
stop_server "$b_pid"

# Corrupt: one byte of the state flipped (the size is right: only the checksum can tell).
cp -r "$work/pristine" "$work/corrupt"
python3 - "$work/corrupt" <<'PY'
import os, sys
for name in os.listdir(sys.argv[1]):
    p = os.path.join(sys.argv[1], name)
    with open(p, "r+b") as f:
        f.seek(os.path.getsize(p) // 2)
        b = f.read(1)
        f.seek(os.path.getsize(p) // 2)
        f.write(bytes([b[0] ^ 0x10]))
PY
start_server c --model "$model" --model-id m --state-cache "$work/corrupt"
chat "$c_url" "$work/t2c.json" "$turn2"
[ "$(cached "$work/t2c.json")" = 0 ] || fail "a corrupt entry was restored"
[ "$(content "$work/t2c.json")" = "$(content "$work/cold.json")" ] || fail "reply after a corrupt entry differs from the cold one"
[ "$(warnings "$work/c.log")" = 1 ] || fail "expected one warning for the corrupt entry: $(cat "$work/c.log")"
grep -q 'checksum mismatch.*discarded' "$work/c.log" || fail "the warning does not say why: $(cat "$work/c.log")"
stop_server "$c_pid"

# Truncated: found when the server starts.
cp -r "$work/pristine" "$work/truncated"
for f in "$work"/truncated/*.state; do truncate -s -100 "$f"; done
start_server d --model "$model" --model-id m --state-cache "$work/truncated"
[ "$(warnings "$work/d.log")" = 1 ] || fail "expected one warning for the truncated entry: $(cat "$work/d.log")"
[ "$(states "$work/truncated")" = 0 ] || fail "the truncated entry was not deleted"
chat "$d_url" "$work/t2d.json" "$turn2"
[ "$(cached "$work/t2d.json")" = 0 ] || fail "a truncated entry was restored"
[ "$(content "$work/t2d.json")" = "$(content "$work/cold.json")" ] || fail "reply after a truncated entry differs"
stop_server "$d_pid"

# Another model sharing the directory: its entries are its own, ours still restore.
make_model "$work/tiny" k3
cp -r "$work/pristine" "$work/shared"
start_server e --model "$work/tiny" --model-id m --state-cache "$work/shared"
chat "$e_url" "$work/other.json" "$turn1"
[ "$(cached "$work/other.json")" = 0 ] || fail "another model restored this model's state"
stop_server "$e_pid"
[ "$(states "$work/shared")" = 2 ] || fail "the other model's entry was not kept beside ours"
start_server f --model "$model" --model-id m --state-cache "$work/shared"
chat "$f_url" "$work/t2f.json" "$turn2"
[ "$(cached "$work/t2f.json")" = "$want" ] || fail "shared directory: cached_tokens $(cached "$work/t2f.json"), expected $want"
[ "$(warnings "$work/e.log")$(warnings "$work/f.log")" = 00 ] || fail "warnings in a shared directory"
stop_server "$f_pid"
# A recurrent model (K3: its KDA state cannot be cut back) and conversations that share only a
# system prompt, a restart before each. The first restores nothing and is saved; the second
# restores nothing either but saves the part where it leaves the first (a .part file); the third
# restores that part over a saved entry and replies exactly as a cold server does.
system="You are a careful assistant. Answer in one short sentence, cite nothing, and never guess."
conversation() {
  python3 -c "import json,sys; print(json.dumps([{'role':'system','content':sys.argv[1]},{'role':'user','content':sys.argv[2]}]))" \
    "$system" "$1"
}
for i in 1 2 3; do
  start_server "k$i" --model "$work/tiny" --model-id m --state-cache "$work/kcache"
  url_var="k${i}_url" pid_var="k${i}_pid"
  chat "${!url_var}" "$work/k$i.json" "$(conversation "Question $i: which colour is the sky?")"
  stop_server "${!pid_var}"
  [ "$(warnings "$work/k$i.log")" = 0 ] || fail "warnings on conversation $i: $(cat "$work/k$i.log")"
done
[ "$(find "$work/kcache" -name '*.part' | wc -l)" = 1 ] || fail "expected one saved part: $(ls "$work/kcache")"
[ "$(cached "$work/k1.json")$(cached "$work/k2.json")" = 00 ] || fail "the first two conversations reported cached tokens"
shared=$(cached "$work/k3.json")
[ "$shared" -ge 64 ] || fail "the third conversation restored $shared tokens, not the shared system prompt"
start_server kcold --model "$work/tiny" --model-id m
chat "$kcold_url" "$work/kcold.json" "$(conversation "Question 3: which colour is the sky?")"
stop_server "$kcold_pid"
[ "$(content "$work/k3.json")" = "$(content "$work/kcold.json")" ] ||
  fail "the reply over a restored part differs from the cold one: $(content "$work/k3.json") vs $(content "$work/kcold.json")"
echo "serve_state_cache: ok"
