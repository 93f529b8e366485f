#!/usr/bin/env python3
"""Tool calls a model generates under `tool_choice` through `sluice serve`, checked by an
independent JSON Schema validator (python-jsonschema).

The twenty tool schemas of tests/fixtures/guided/agent_tools.json (the kinds coding agents send:
strings, numbers, enums, nesting, arrays, optional fields, anyOf, const, formats, $ref, none) are
offered through POST /v1/chat/completions, request after request: one tool alone or all twenty,
with tool_choice "required", the named tool ({"type": "function", ...}) or, on /v1/messages,
{"type": "any"}; parallel calls allowed every other request; temperature 0 and 1 in turn; no
thinking (reasoning_effort "none" on chat completions unless --reasoning-effort says otherwise;
/v1/messages thinks only when asked). Every
call the server returns must name an offered tool (the named one when named) and carry arguments
that are a JSON object valid against that tool's schema (formats asserted). Requests continue
until --calls calls came back (or --max-requests were sent). Replies cut at max_tokens before a
call completed are counted apart: the grammar allows only valid calls, but a reply may end before
one is complete.

Usage: bench/tool_calls.py SLUICE MODEL_DIR [--calls 500] [--max-tokens 200] [--json OUT]
       [-- extra serve flags]
Exit status 0 when every call is valid, 1 otherwise.
"""
import argparse
import importlib.metadata
import json
import os
import sys
import time

import jsonschema

from serve_util import Server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def validator(schema):
    schema = schema if schema is not None else {"type": "object"}
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sluice")
    ap.add_argument("model")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--max-requests", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--reasoning-effort", default="none",
                    help="chat completions' reasoning_effort (none: no thinking; gpt-oss needs low or more)")
    ap.add_argument("--json", help="write the per-request rows here")
    argv, extra = sys.argv[1:], []
    if "--" in argv:  # serve flags follow
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = ap.parse_args(argv)

    tools = json.load(open(os.path.join(ROOT, "tests/fixtures/guided/agent_tools.json")))
    check = {t["name"]: validator(t["parameters"]) for t in tools}
    openai_tools = [{"type": "function", "function": {"name": t["name"], "description": "Calls %s." % t["name"],
                                                      "parameters": t["parameters"] or {"type": "object"}}}
                    for t in tools]
    anthropic_tools = [{"name": t["name"], "description": "Calls %s." % t["name"],
                        "input_schema": t["parameters"] or {"type": "object"}} for t in tools]

    server = Server(args.sluice, args.model, extra, "tool_calls")
    rows, calls, invalid, t0 = [], 0, [], time.time()
    counts = {"requests": 0, "with_call": 0, "cut_before_a_call": 0}
    by_choice, by_tool = {}, {}
    try:
        i = 0
        while calls < args.calls and i < args.max_requests:
            k = i % len(tools)
            every = (i // len(tools)) % 4 == 3  # every fourth round offers all twenty
            choice = ["required", "named", "any"][i % 3]
            temperature = [0.0, 1.0][(i // 3) % 2]
            parallel = i % 2 == 1
            name = tools[k]["name"]
            user = "Please use %s now." % name
            offered = list(range(len(tools))) if every else [k]
            if choice == "any":
                body = {"model": "m", "max_tokens": args.max_tokens, "temperature": temperature,
                        "messages": [{"role": "user", "content": user}],
                        "tools": [anthropic_tools[j] for j in offered],
                        "tool_choice": {"type": "any", "disable_parallel_tool_use": not parallel}}
                r = server.post("/v1/messages", body)
                got = [(b["name"], b["input"]) for b in r["content"] if b["type"] == "tool_use"]
                cut = r["stop_reason"] == "max_tokens"
            else:
                body = {"model": "m", "max_tokens": args.max_tokens, "temperature": temperature,
                        "messages": [{"role": "user", "content": user}], "reasoning_effort": args.reasoning_effort,
                        "tools": [openai_tools[j] for j in offered], "parallel_tool_calls": parallel,
                        "tool_choice": "required" if choice == "required" else
                        {"type": "function", "function": {"name": name}}}
                r = server.post("/v1/chat/completions", body)
                msg = r["choices"][0]["message"]
                got = []
                for c in msg.get("tool_calls") or []:
                    try:
                        got.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
                    except ValueError:
                        got.append((c["function"]["name"], c["function"]["arguments"]))  # not JSON: invalid below
                cut = r["choices"][0]["finish_reason"] == "length"
            counts["requests"] += 1
            if not got:
                if cut:
                    counts["cut_before_a_call"] += 1
                else:
                    invalid.append("request %d (%s, %s): finished without a call: %r" % (i, choice, name, r))
            else:
                counts["with_call"] += 1
            allowed = {tools[j]["name"] for j in offered}
            for call_name, arguments in got:
                calls += 1
                by_choice[choice] = by_choice.get(choice, 0) + 1
                by_tool[call_name] = by_tool.get(call_name, 0) + 1
                why = None
                if call_name not in allowed:
                    why = "named %s, not an offered tool" % call_name
                elif choice == "named" and call_name != name:
                    why = "named %s, not the tool asked for (%s)" % (call_name, name)
                elif not isinstance(arguments, dict):
                    why = "arguments are not a JSON object: %r" % (arguments,)
                else:
                    errors = sorted(check[call_name].iter_errors(arguments), key=str)
                    if errors:
                        why = "arguments %s invalid: %s" % (json.dumps(arguments), errors[0].message)
                if why:
                    invalid.append("request %d (%s, T=%g): %s" % (i, choice, temperature, why))
            if len(got) > 1 and not parallel:
                invalid.append("request %d: %d calls with parallel calls off" % (i, len(got)))
            rows.append({"request": i, "choice": choice, "temperature": temperature, "offered": len(offered),
                         "parallel": parallel, "calls": len(got), "cut": cut})
            i += 1
            if i % 50 == 0:
                print("tool_calls: %d requests, %d calls, %.0f s" % (i, calls, time.time() - t0), file=sys.stderr,
                      flush=True)
    finally:
        server.close()
    seconds = time.time() - t0
    print("tool_calls: %d requests in %.0f s: %d with calls, %d cut at %d tokens before a call completed"
          % (counts["requests"], seconds, counts["with_call"], counts["cut_before_a_call"], args.max_tokens))
    print("tool_calls: %d calls (%s) of %d tools; valid against their schemas (python-jsonschema %s): %d of %d"
          % (calls, ", ".join("%s %d" % kv for kv in sorted(by_choice.items())), len(by_tool),
             importlib.metadata.version("jsonschema"), calls - len(invalid), calls))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "counts": counts, "calls": calls, "by_tool": by_tool, "invalid": invalid}, f,
                      indent=1)
    for line in invalid[:20]:
        print("INVALID: " + line, file=sys.stderr)
    if calls < args.calls:
        print("tool_calls: only %d calls in %d requests (wanted %d)" % (calls, counts["requests"], args.calls),
              file=sys.stderr)
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
