#!/usr/bin/env python3
"""An agent trace against `sluice serve`: time to first token with prefix reuse against cold.

A coding agent's requests grow as it works: a long system prompt and task, then turn after turn of
a tool call and its (long) output, each request sharing all but its newest turn with an earlier
one. Not always the previous one: now and then the agent goes back a few turns and tries another
tool output from there (a retry, a sub-agent, an edited step). This script builds such a trace
(deterministic: seeded), plays it against two servers of the same model:
  - reuse: the defaults (the session's own state, the prefix cache in RAM);
  - cold:  --no-state-reuse (every prompt prefilled whole);
and reports per request the prompt tokens, the tokens reused (usage.cached_tokens), each arm's
time to first token (the reply's `sluice.ttft_ms`: from the request's turn to its first token) and
the ratio; and checks that both arms reply with the same text (greedy): reuse is exact.

Usage: bench/agent_trace.py SLUICE MODEL_DIR [--requests 50] [--first 8000] [--last 40000]
       [--cold-every 1] [--branch-every 5] [--json OUT] [-- extra serve flags for both arms]
--cold-every K runs the cold arm on every K-th request only (cold prefills of 40k-token prompts
are the slow part); the ratio is reported over the requests both arms ran.
"""
import argparse
import json
import random
import statistics
import sys

from serve_util import Server

WORDS = ("def class return import self value index buffer token layer expert cache state prefix stream "
         "drive read write file path error result config model weight router kernel thread queue").split()


def text(rng, words):
    out = []
    for _ in range(words):
        out.append(rng.choice(WORDS))
        if rng.random() < 0.1:
            out.append("\n")
    return " ".join(out)


def chat(server, messages, max_tokens):
    return server.post("/v1/chat/completions", {"model": "m", "messages": messages, "max_tokens": max_tokens,
                                                "temperature": 0, "reasoning_effort": "none"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sluice")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--first", type=int, default=8000, help="tokens of the first prompt")
    ap.add_argument("--last", type=int, default=40000, help="tokens of the last prompt")
    ap.add_argument("--cold-every", type=int, default=1)
    ap.add_argument("--branch-every", type=int, default=5,
                    help="every K-th request goes back 2-4 turns and tries another tool output from there")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the per-request table here")
    ap.add_argument("extra", nargs="*", help="serve flags for both arms (after --)")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    flags = ["--max-context", "131072"] + args.extra
    reuse = Server(args.sluice, args.model, flags, "agent_trace")
    cold = Server(args.sluice, args.model, flags + ["--no-state-reuse"], "agent_trace")
    try:
        # Words per token of this tokenizer, from a probe (its own request, not in the trace).
        probe = text(random.Random(99), 2000)
        tokens = chat(cold, [{"role": "user", "content": probe}], 1)["usage"]["prompt_tokens"]
        words_per_token = 2000 / tokens
        step_words = int((args.last - args.first) / max(1, args.requests - 1) * words_per_token)
        system = [{"role": "system", "content": "You are a coding agent.\n" + text(rng, int(args.first * 0.7 * words_per_token))},
                  {"role": "user", "content": "Task:\n" + text(rng, int(args.first * 0.3 * words_per_token))}]
        turns = []  # (assistant tool call, tool output) pairs after `system`
        rows = []
        for i in range(args.requests):
            if i > 0:
                if args.branch_every > 0 and i % args.branch_every == 0 and len(turns) > 4:
                    back = rng.randint(2, 4)  # back to an earlier request's prompt, another output
                    turns = turns[:len(turns) - back]
                    # the branch's output is as long as the turns it replaces, so prompts keep growing
                    out_words = step_words * (back + 1)
                else:
                    out_words = step_words
                call = f"run_tool(step={i}, seed={rng.randint(0, 10**6)})"
                turns.append((call, text(rng, out_words)))
            messages = list(system)
            for call, out in turns:
                messages.append({"role": "assistant", "content": call})
                messages.append({"role": "user", "content": "Tool output:\n" + out})
            r = chat(reuse, messages, args.max_tokens)
            row = {"request": i, "prompt_tokens": r["usage"]["prompt_tokens"],
                   "cached_tokens": r["usage"]["prompt_tokens_details"]["cached_tokens"],
                   "ttft_ms": r["sluice"]["ttft_ms"], "reply": r["choices"][0]["message"]["content"]}
            if i % args.cold_every == 0:
                c = chat(cold, messages, args.max_tokens)
                row["cold_ttft_ms"] = c["sluice"]["ttft_ms"]
                row["same_reply"] = c["choices"][0]["message"]["content"] == row["reply"]
                row["ratio"] = row["ttft_ms"] / row["cold_ttft_ms"]
            rows.append(row)
            print(f"{i:3d} prompt {row['prompt_tokens']:6d} cached {row['cached_tokens']:6d} "
                  f"ttft {row['ttft_ms']:9.1f} ms" +
                  (f"  cold {row['cold_ttft_ms']:9.1f} ms  ratio {row['ratio']:.3f}  same {row['same_reply']}"
                   if "cold_ttft_ms" in row else ""), flush=True)
        both = [r for r in rows if "cold_ttft_ms" in r]
        # Request 0 has nothing to reuse: the ratios are over the rest.
        later = [r for r in both if r["request"] > 0]
        summary = {
            "requests": len(rows),
            "prompt_tokens_first_last": [rows[0]["prompt_tokens"], rows[-1]["prompt_tokens"]],
            "shared_fraction_mean": statistics.mean(r["cached_tokens"] / r["prompt_tokens"] for r in rows[1:]) if len(rows) > 1 else 0,
            "ttft_ratio_total": sum(r["ttft_ms"] for r in later) / sum(r["cold_ttft_ms"] for r in later) if later else None,
            "ttft_ratio_median": statistics.median(r["ratio"] for r in later) if later else None,
            "ttft_ratio_max": max(r["ratio"] for r in later) if later else None,
            "same_replies": sum(r["same_reply"] for r in both), "compared": len(both),
        }
        print(json.dumps(summary))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"summary": summary, "rows": rows}, f, indent=1)
        if summary["same_replies"] != summary["compared"]:
            print("agent_trace: a reused reply differs from the cold one", file=sys.stderr)
            return 1
        return 0
    finally:
        reuse.close()
        cold.close()


if __name__ == "__main__":
    sys.exit(main())
