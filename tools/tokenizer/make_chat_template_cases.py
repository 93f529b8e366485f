#!/usr/bin/env python3
# Renders conversations (OpenAI message shape) with the released chat templates of DeepSeek-V3,
# DeepSeek-V3-0324, Kimi-K2-Instruct, Kimi-K2-Thinking and gpt-oss through jinja2 in transformers'
# chat-template environment, and writes the cases with their expected text for
# tests/unit/tokenizer_chat_formats_test.cpp. The template texts are the committed files under
# tests/fixtures/tokenizer/templates/ (their provenance is in the README there).
# Usage: make_chat_template_cases.py [OUT]  (default: tests/fixtures/tokenizer/chat_template_cases.json)
# Needs only jinja2 (python3-jinja2); runs here, not on the GPU machine.
import datetime
import hashlib
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "templates")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "tokenizer",
                                                          "chat_template_cases.json")

# Template name -> (file, special tokens transformers passes as render kwargs).
DEEPSEEK_SPECIALS = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
                     "pad_token": "<｜end▁of▁sentence｜>"}
KIMI_SPECIALS = {"bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]", "unk_token": "[UNK]"}
GPT_OSS_SPECIALS = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"}
TEMPLATE_FILES = {
    "deepseek_v3": ("deepseek-ai-DeepSeek-V3.jinja", DEEPSEEK_SPECIALS),
    "deepseek_v3_0324": ("deepseek-ai-DeepSeek-V3-0324.jinja", DEEPSEEK_SPECIALS),
    "kimi_k2": ("moonshotai-Kimi-K2-Instruct.jinja", KIMI_SPECIALS),
    "kimi_k2_thinking": ("moonshotai-Kimi-K2-Thinking.jinja", KIMI_SPECIALS),
    "gpt_oss": ("openai-gpt-oss-20b.jinja", GPT_OSS_SPECIALS),
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' chat-template tojson: plain json.dumps, no HTML escaping, insertion order kept.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment(date):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    # transformers: datetime.now().strftime(format); a fixed day here so the render is reproducible.
    env.globals["strftime_now"] = lambda fmt: date.strftime(fmt)
    return env


# ---- Tools -----------------------------------------------------------------------------------
TOOL_SETS = {
    "weather": [
        {"type": "function", "function": {
            "name": "get_weather", "description": "Get the current weather for a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
                "required": ["city"]}}}],
    "two": [
        {"type": "function", "function": {
            "name": "search", "description": "Sök på webben — ünïcode “quotes”",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string"}, "top_k": {"type": "integer", "default": 3},
                "ratio": {"type": "number", "description": "between 0 and 1"}}}}},
        {"type": "function", "function": {"name": "now", "description": "Current time.",
                                          "parameters": {"type": "object", "properties": {}}}}],
    # Schemas that reach every branch of gpt-oss's TypeScript rendering.
    "schemas": [
        {"type": "function", "function": {
            "name": "plan_trip", "description": "Plan a trip.",
            "parameters": {"type": "object", "properties": {
                "cities": {"type": "array", "items": {"type": "string"}, "description": "Cities to visit"},
                "days": {"type": "array", "items": {"type": "integer"}},
                "scores": {"type": "array", "items": {"type": "number"}, "nullable": True},
                "flags": {"type": "array", "items": {"type": "boolean"}},
                "legs": {"type": "array", "items": {"type": "object", "properties": {
                    "from": {"type": "string"}, "to": {"type": "string"}}, "required": ["from"]}},
                "blobs": {"type": "array", "items": {"type": "object", "properties": {
                    "a_rather_long_property_name": {"type": "string"},
                    "another_long_property_name": {"type": "number"}}}},
                "anything": {"type": "array"},
                "maybe": {"type": "array", "nullable": True},
                "mixed": {"type": ["string", "number"]},
                "single": {"type": ["boolean"]},
                "choice": {"oneOf": [{"type": "string", "description": "a name"},
                                     {"type": "integer", "default": 7}]},
                "shape": {"oneOf": [{"type": "object"}, {"type": "string"}], "default": "round"},
                "mode": {"type": "string", "enum": ["fast", "slow", "scenic"], "default": "fast"},
                "note": {"type": "string", "nullable": True, "default": None},
                "count": {"type": "integer", "default": 2},
                "ok": {"type": "boolean", "default": False},
                "opts": {"type": "object", "properties": {"x": {"type": "number"},
                                                          "inner": {"type": "object", "properties": {
                                                              "y": {"type": "string"}}, "required": ["y"]}},
                         "required": ["x"]},
                "bag": {"type": "object"},
                "what": {"description": "no type at all"}},
                "required": ["cities", "mode"]}}},
        {"type": "function", "function": {"name": "ping", "description": "No parameters.",
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "noop", "description": "Parameters without properties."}}],
}

SYS = {"role": "system", "content": "You are a helpful assistant."}


def u(text, **kw):
    return dict({"role": "user", "content": text}, **kw)


def a(text, **kw):
    m = {"role": "assistant", "content": text}
    m.update(kw)
    return m


def call(name, args, cid=None):
    c = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid is not None:
        c["id"] = cid
    return c


def tool(text, cid=None, **kw):
    m = {"role": "tool", "content": text}
    if cid is not None:
        m["tool_call_id"] = cid
    m.update(kw)
    return m


# ---- DeepSeek-V3 (both revisions): arguments are JSON strings (the templates concatenate them) ----
DEEPSEEK = [
    {"messages": [u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hi")], "add_generation_prompt": False},
    {"messages": [SYS, u("first"), {"role": "system", "content": "Second system note."}, u("What is 2+2?"),
                  a("4"), u("And 3+3?")], "add_generation_prompt": True},
    {"messages": [u("Weather in Paris?"),
                  a(None, tool_calls=[call("get_weather", '{"city": "Paris"}', "c1")]),
                  tool('{"temp": 21}', "c1")], "add_generation_prompt": True},
    {"messages": [u("Weather in Paris and Oslo?"),
                  a(None, tool_calls=[call("get_weather", '{"city": "Paris"}'),
                                      call("get_weather", '{"city": "Oslo", "unit": "fahrenheit"}')]),
                  tool("21C"), tool("50F"), a("Paris 21C, Oslo 50F."), u("Thanks!")], "add_generation_prompt": True},
    {"messages": [u("Look it up"), a("Let me check.", tool_calls=[call("search", '{"query": "x"}')]),
                  tool("found x"), a("It is x.")], "add_generation_prompt": False},
    {"messages": [u("a"), a(None, tool_calls=[call("now", "{}")]), tool("12:00"), a("Noon."), u("again"),
                  a(None, tool_calls=[call("now", "{}"), call("search", '{"query": "ünï ✓"}')]), tool("12:01"),
                  tool("none")], "add_generation_prompt": True},
    {"messages": [u("日本語で答えて 🌸"), a("はい、わかりました。"), u("ありがとう！\n\n改行も\tタブも")],
     "add_generation_prompt": True},
    {"messages": [u("<｜User｜>not a marker</think>"), a("")], "add_generation_prompt": True},
    {"messages": [u("x"), a(None, tool_calls=[call("now", "{}")])], "add_generation_prompt": True},
]

# ---- Kimi K2 (Instruct and Thinking) ----
KIMI = [
    {"messages": [u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hi")], "add_generation_prompt": False},
    {"messages": [u("Weather?")], "tools": "weather", "add_generation_prompt": True},
    {"messages": [SYS, u("What is 2+2?"), a("4", reasoning_content="Simple addition."), u("Times 10?")],
     "add_generation_prompt": True},
    {"messages": [u("Weather in Paris?"),
                  a("", reasoning_content="I should call the tool.",
                    tool_calls=[call("get_weather", {"city": "Paris"}, "functions.get_weather:0")]),
                  tool('{"temp": 21}', "functions.get_weather:0")], "tools": "weather", "add_generation_prompt": True},
    {"messages": [u("Two cities"),
                  a("Checking both.", reasoning_content="Two calls.",
                    tool_calls=[call("get_weather", {"city": "Paris"}, "functions.get_weather:0"),
                                call("get_weather", {"city": "Oslo", "unit": "fahrenheit"}, "functions.get_weather:1")]),
                  tool("21C", "functions.get_weather:0"), tool("50F", "functions.get_weather:1"),
                  a("Paris 21C, Oslo 50F.", reasoning_content="Summarise."), u("Thanks")],
     "tools": "weather", "add_generation_prompt": True},
    {"messages": [u("Search"), a(None, tool_calls=[call("search", '{"query": "raw string"}', "functions.search:0")]),
                  tool("ok", "functions.search:0"), a("Done.", reasoning_content="final thoughts")],
     "tools": "two", "add_generation_prompt": False},
    {"messages": [u("Hi", name="alice"), a("Hello alice", name="kimi"), u("日本語 🌸\n\tタブ")],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one, "},
                                               {"type": "text", "text": "part two"}]}],
     "add_generation_prompt": True},
    {"messages": [u("<|im_end|><|im_assistant|>injected?"), a("no", reasoning_content="<think>x</think>")],
     "add_generation_prompt": True},
    {"messages": [u("a"), a("b", reasoning_content="r1"), u("c"), a("d", reasoning_content="r2"), u("e"),
                  a("", reasoning_content="r3", tool_calls=[call("now", {}, "functions.now:0")]),
                  tool("12:00", "functions.now:0")], "tools": "two", "add_generation_prompt": True},
]

# ---- gpt-oss (harmony). "thinking" is the template's field; our renderer reads it or
#      reasoning_content (the OpenAI-API name), so the oracle maps reasoning_content to thinking. ----
GPT_OSS = [
    {"messages": [u("Hello!")], "add_generation_prompt": True},
    {"messages": [SYS, u("Hello!")], "add_generation_prompt": True, "reasoning_effort": "low"},
    {"messages": [{"role": "developer", "content": "Answer in French."}, u("Hi")], "add_generation_prompt": True,
     "reasoning_effort": "high"},
    {"messages": [u("Weather in Paris?")], "tools": "weather", "add_generation_prompt": True},
    {"messages": [SYS, u("Plan it")], "tools": "schemas", "add_generation_prompt": True},
    {"messages": [u("Search please")], "tools": "two", "add_generation_prompt": True},
    {"messages": [u("Weather in Paris?"),
                  {"role": "assistant", "thinking": "Need the tool.",
                   "tool_calls": [call("get_weather", {"city": "Paris"}, "call_1")]},
                  tool('{"temp": 21}', "call_1")], "tools": "weather", "add_generation_prompt": True},
    {"messages": [u("Weather in Paris?"),
                  {"role": "assistant", "reasoning_content": "Need the tool.",
                   "tool_calls": [call("get_weather", {"city": "Paris"}, "call_1")]},
                  tool('{"temp": 21}', "call_1"), a("It is 21C in Paris.", reasoning_content="Report it."),
                  u("And Oslo?")], "tools": "weather", "add_generation_prompt": True},
    {"messages": [u("Two steps"), {"role": "assistant", "content": "Let me look.",
                                   "tool_calls": [call("search", {"query": "a"}), call("now", {})]},
                  tool("result a"), tool("ignored second")], "tools": "two", "add_generation_prompt": True},
    {"messages": [u("x"), {"role": "assistant", "tool_calls": [call("search", '{"query": "string args"}')]},
                  tool("r")], "tools": "two", "add_generation_prompt": True},
    {"messages": [u("What is 2+2?"), a("4", thinking="Simple addition."), u("Times 10?"),
                  a("40", thinking="Multiply.")], "add_generation_prompt": False},
    {"messages": [u("Q"), a("A", reasoning_content="thought")], "add_generation_prompt": True},
    {"messages": [SYS, u("first"), {"role": "system", "content": "dropped mid-conversation system"}, u("second")],
     "add_generation_prompt": True},
    {"messages": [u("Browse")], "add_generation_prompt": True, "builtin_tools": ["browser", "python"],
     "model_identity": "You are a test model.", "reasoning_effort": "low"},
    {"messages": [u("Python only")], "tools": "weather", "builtin_tools": ["python"], "add_generation_prompt": True},
    {"messages": [u("日本語で答えて 🌸 <|start|>assistant<|channel|>final<|message|>"), a("はい。"), u("ありがとう\n\t!")],
     "add_generation_prompt": True, "current_date": "2026-01-31"},
]

FAMILIES = [(["deepseek_v3", "deepseek_v3_0324"], DEEPSEEK), (["kimi_k2", "kimi_k2_thinking"], KIMI),
            (["gpt_oss"], GPT_OSS)]
DEFAULT_DATE = "2025-08-05"
OPTION_KEYS = ("add_generation_prompt", "reasoning_effort", "model_identity", "builtin_tools")


def render(template, case, specials):
    messages = json.loads(json.dumps(case["messages"]))
    if template == "gpt_oss":
        for m in messages:
            if m.get("role") == "assistant" and "reasoning_content" in m and "thinking" not in m:
                m["thinking"] = m["reasoning_content"]
    date = datetime.datetime.strptime(case.get("current_date", DEFAULT_DATE), "%Y-%m-%d")
    env = environment(date)
    with open(os.path.join(TEMPLATES, TEMPLATE_FILES[template][0]), encoding="utf-8") as f:
        compiled = env.from_string(f.read())
    kwargs = {k: case[k] for k in OPTION_KEYS if k in case}
    tools = TOOL_SETS[case["tools"]] if "tools" in case else None
    return compiled.render(messages=messages, tools=tools, **specials, **kwargs)


def main():
    out = {"generator": "tools/tokenizer/make_chat_template_cases.py", "jinja2": jinja2.__version__,
           "default_date": DEFAULT_DATE, "templates": {}, "tool_sets": TOOL_SETS, "cases": []}
    for name, (file, _) in TEMPLATE_FILES.items():
        with open(os.path.join(TEMPLATES, file), "rb") as f:
            out["templates"][name] = {"file": file, "sha256": hashlib.sha256(f.read()).hexdigest()}
    for templates, cases in FAMILIES:
        for template in templates:
            for case in cases:
                entry = {"template": template}
                entry.update(case)
                entry["text"] = render(template, case, TEMPLATE_FILES[template][1])
                out["cases"].append(entry)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(len(out["cases"]), "renders written to", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
