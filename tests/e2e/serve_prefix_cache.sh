#!/usr/bin/env bash
# End-to-end: the prefix cache in RAM on `sluice serve` with the default model (K3: KDA + MLA).
# Four chats share a long system prompt but not each other's questions: the first prefills it, the
# second reuses it up to the last block boundary inside it and keeps a part where it leaves the
# first, the third and fourth resume there (cached_tokens: exactly the shared prefix), and each
# reply is the reply of a server that never reuses anything. Then the first chat goes on after
# the others: its state was kept (its whole tape is reused). With parts at pass ends only
# (--prefix-block 0), the second chat keeps a part where it leaves the first, and the third and
# fourth resume there. --prefix-cache-gb 0 gives the old behaviour (only the last conversation).
# SLUICE_E2E_SMALL=1 (the sanitizer run's budget): blocks of 128 positions and a system prompt
# of 500 words instead of 1,800, the same paths in about a quarter of the prefill.
# Usage: serve_prefix_cache.sh <sluice-binary> <source-dir>
set -euo pipefail
sluice=$1
src=$2
source "$src/tests/e2e/serve/lib.sh"  # $work (removed at exit), servers killed at exit
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
model="$src/models/default/target"

prompt() { field "$1" "j['usage']['prompt_tokens']"; }

# A system prompt of ~2,500 tokens (a byte-pair tokenizer of 4k ids; ~650 when small) and four
# questions; blocks of 512 positions (128 when small), so the prompt holds four or more.
block=512 words=1800
[ "${SLUICE_E2E_SMALL:-0}" = 1 ] && block=128 words=500
system=$(python3 -c "import random,sys; r=random.Random(7); w='def class return import self value index buffer token layer expert cache state'.split(); print(' '.join(r.choice(w) for _ in range(int(sys.argv[1]))))" "$words")
messages() {
  python3 -c "import json,sys; print(json.dumps([{'role':'system','content':sys.argv[1]},{'role':'user','content':sys.argv[2]}]))" "$system" "$1"
}
questions=("What does this code do?" "Find the bug in it." "Explain the cache." "Rewrite it in Rust.")

start_server cold --model "$model" --model-id m --no-state-reuse
start_server warm --model "$model" --model-id m --prefix-block "$block"
start_server off --model "$model" --model-id m --prefix-cache-gb 0
# Parts only at pass ends (the default with streamed experts): the second chat keeps one where it
# leaves the first, and the third and fourth resume from it.
start_server ends --model "$model" --model-id m --prefix-block 0
for i in 0 1 2 3; do
  m=$(messages "${questions[$i]}")
  chat "$cold_url" "$work/cold$i.json" "$m" 6
  chat "$warm_url" "$work/warm$i.json" "$m" 6
  chat "$off_url" "$work/off$i.json" "$m" 6
  chat "$ends_url" "$work/ends$i.json" "$m" 6
  [ "$(content "$work/ends$i.json")" = "$(content "$work/cold$i.json")" ] || fail "request $i: reply with --prefix-block 0 differs"
  [ "$(content "$work/warm$i.json")" = "$(content "$work/cold$i.json")" ] ||
    fail "request $i: reply with the prefix cache $(content "$work/warm$i.json") differs from the cold one $(content "$work/cold$i.json")"
  [ "$(content "$work/off$i.json")" = "$(content "$work/cold$i.json")" ] || fail "request $i: reply without the prefix cache differs"
  [ "$(cached "$work/cold$i.json")" = 0 ] || fail "request $i: a server without reuse reports cached tokens"
  [ "$(cached "$work/off$i.json")" = 0 ] || fail "request $i: --prefix-cache-gb 0 reused $(cached "$work/off$i.json") tokens of another conversation"
done
n=$(prompt "$work/warm0.json")
[ "$n" -gt $((4 * block)) ] || fail "the shared prompt is only $n tokens; the test wants several $block-position blocks"
[ "$(cached "$work/warm0.json")" = 0 ] || fail "the first request reused $(cached "$work/warm0.json") tokens"
# The second chat resumes from the last multiple of the block inside the shared system prompt and keeps
# a part where it leaves the first; the third and fourth resume there.
w1=$(cached "$work/warm1.json") w2=$(cached "$work/warm2.json")
[ "$w1" -ge $((4 * block)) ] && [ $((w1 % block)) = 0 ] ||
  fail "request 1 reused $w1 tokens (want a multiple of $block, >= $((4 * block)))"
[ "$w2" -gt "$w1" ] && [ "$w2" -lt $((w1 + block)) ] && [ "$(cached "$work/warm3.json")" = "$w2" ] ||
  fail "requests 2 and 3 reused $w2 and $(cached "$work/warm3.json") tokens (want where the chats part, after $w1)"
e2=$(cached "$work/ends2.json")
[ "$(cached "$work/ends1.json")" = 0 ] && [ "$e2" = "$w2" ] && [ "$(cached "$work/ends3.json")" = "$e2" ] ||
  fail "--prefix-block 0: reused $(cached "$work/ends1.json"), $e2, $(cached "$work/ends3.json") (want 0, then $w2 twice)"

# The first conversation's second turn, after the three others: continues its own kept state.
turn2=$(python3 -c "import json,sys; m=json.loads(sys.argv[1]); m += [{'role':'assistant','content':json.loads(sys.argv[2])},
{'role':'user','content':'Go on.'}]; print(json.dumps(m))" "$(messages "${questions[0]}")" "$(content "$work/warm0.json")")
chat "$cold_url" "$work/cold4.json" "$turn2" 6
chat "$warm_url" "$work/warm4.json" "$turn2" 6
[ "$(content "$work/warm4.json")" = "$(content "$work/cold4.json")" ] || fail "second turn: reply differs from the cold one"
c=$(cached "$work/warm4.json")
[ "$c" -ge "$n" ] || fail "second turn of the first chat reused $c tokens, want at least its first prompt's $n"
echo "OK: shared system prompt of $n tokens reused as $w1, $w2, $(cached "$work/warm3.json") (block $block) and 0, $e2, $e2 (pass ends); a kept conversation as $c"
