#!/usr/bin/env python3
# Writes the Qwen3 chat conversations (OpenAI message shape) that the oracle renders with the package's
# chat template through jinja2 and that tests/unit/tokenizer_chat_test.cpp renders with our renderer.
import json
import sys

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                           "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Sök på webben — ünïcode “quotes”",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer",
                                                          "default": 3}, "ratio": {"type": "number"}}}}}
SYS = {"role": "system", "content": "You are a helpful assistant."}


def u(text):
    return {"role": "user", "content": text}


def a(text, **kw):
    m = {"role": "assistant", "content": text}
    m.update(kw)
    return m


def call(name, args, cid=None):
    c = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid:
        c["id"] = cid
    return c


def tool(text, cid=None):
    m = {"role": "tool", "content": text}
    if cid:
        m["tool_call_id"] = cid
    return m


cases = [
    {"messages": [u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hello!")], "add_generation_prompt": True, "enable_thinking": False},
    {"messages": [u("Hi")], "add_generation_prompt": False},
    {"messages": [SYS, u("What is 2+2?"), a("4"), u("And 3+3?")], "add_generation_prompt": True},
    {"messages": [u("What is 2+2?"), a("4", reasoning_content="Simple addition."), u("Times 10?")],
     "add_generation_prompt": True},
    {"messages": [u("Q1"), a("<think>\nthinking one\n</think>\n\nAnswer one"), u("Q2"),
                  a("<think>\nthinking two\n</think>\n\nAnswer two")], "add_generation_prompt": False},
    {"messages": [u("Q"), a("A", reasoning_content="  reasoning with spaces \n\n")], "add_generation_prompt": False},
    {"messages": [u("日本語で答えて 🌸"), a("はい、わかりました。"), u("ありがとう！\n\n改行も\tタブも")],
     "add_generation_prompt": True, "enable_thinking": False},
    {"messages": [SYS, u("Weather in Paris?")], "tools": [WEATHER], "add_generation_prompt": True},
    {"messages": [u("Weather in Paris?")], "tools": [WEATHER, SEARCH], "add_generation_prompt": True},
    {"messages": [SYS, u("Weather in Paris?"),
                  a("", tool_calls=[call("get_weather", {"city": "Paris", "unit": "c"}, "c1")]),
                  tool('{"temp": 21, "sky": "clear"}', "c1")], "tools": [WEATHER], "add_generation_prompt": True},
    {"messages": [u("Weather in Paris and Oslo?"),
                  a("Let me check both.", tool_calls=[call("get_weather", {"city": "Paris"}),
                                                      call("get_weather", {"city": "Oslo", "unit": "f"})]),
                  tool("21C"), tool("50F"), a("Paris 21C, Oslo 50F."), u("Thanks")],
     "tools": [WEATHER], "add_generation_prompt": True},
    {"messages": [u("Search please"),
                  a("", reasoning_content="I should search.",
                    tool_calls=[call("search", '{"query": "raw string args", "top_k": 2}')]),
                  tool("result: ok")], "tools": [SEARCH], "add_generation_prompt": True},
    {"messages": [u("Search please"), a("", tool_calls=[call("search", {"query": "ünï ✓", "ratio": 0.5,
                                                                         "top_k": 10, "nested": {"a": [1, 2.25, None, True]}})]),
                  tool("no results"), a("Nothing found.")], "tools": [SEARCH], "add_generation_prompt": False},
    {"messages": [SYS, u("first"), {"role": "system", "content": "A mid-conversation system note."}, u("second")],
     "add_generation_prompt": True},
    {"messages": [u("multi step"), a("step 1", reasoning_content="r1", tool_calls=[call("search", {"query": "a"})]),
                  tool("ra"), a("step 2", reasoning_content="r2", tool_calls=[call("search", {"query": "b"})]),
                  tool("rb")], "tools": [SEARCH], "add_generation_prompt": True},
    {"messages": [u("multi step"), a("step 1", reasoning_content="r1", tool_calls=[call("search", {"query": "a"})]),
                  tool("ra"), a("final", reasoning_content="r2")], "tools": [SEARCH], "add_generation_prompt": False},
    {"messages": [u("<tool_response>\nfake\n</tool_response>"), a("ok")], "add_generation_prompt": True},
    {"messages": [u(""), a("")], "add_generation_prompt": True},
    {"messages": [SYS, u("code?"), a("```python\nprint('hi')\n```\n")], "add_generation_prompt": True,
     "enable_thinking": True},
    {"messages": [u("x"), a("\n\nleading newlines", reasoning_content="\nthink\n")], "add_generation_prompt": False},
    {"messages": [u("x"), a("before</think>\n\nafter")], "add_generation_prompt": False},
    {"messages": [u("Tools but no system")], "tools": [SEARCH], "add_generation_prompt": True, "enable_thinking": False},
    {"messages": [SYS, u("a"), a("b"), u("c"), a("d", reasoning_content="e"), u("f")],
     "add_generation_prompt": True},
]

if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else "qwen3_chat_cases.json", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(len(cases), "cases", file=sys.stderr)
