// Chat rendering and reply parsing: Qwen3 renders must equal the package's chat template run through
// jinja2 (tests/fixtures/tokenizer/qwen3_chat_expected.json) byte for byte and id for id; K3 renders
// are checked against facts of Moonshot's encoder (spec 4.3) on a K3-layout tokenizer built from
// o200k ranks; parsers must invert the renderers, also when fed one token at a time.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "tokenizer/chat.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_data.h"

namespace sluice::tokenizer {
namespace {
using testing::fixture_path;
bool utf8_ok(const std::string& s) { return utf8_is_valid(s); }

ChatJson load(const std::string& name) {
  std::ifstream in(fixture_path(name));
  return ChatJson::parse(in);
}

bool mentions_special(const ChatJson& v, const Tokenizer& tok) {
  if (v.is_string()) {
    for (const SpecialToken& s : tok.special_tokens())
      if (v.get<std::string>().find(s.spelling) != std::string::npos) return true;
    return false;
  }
  if (v.is_structured())
    for (const auto& e : v)
      if (mentions_special(e, tok)) return true;
  return false;
}

TEST(TokenizerChat, Qwen3MatchesJinjaTemplate) {
  SLUICE_REQUIRE_TOKENIZER(tok, "qwen3");
  ChatJson cases = load("qwen3_chat_cases.json"), expected = load("qwen3_chat_expected.json");
  ASSERT_GE(cases.size(), 20u);
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_EQ(detect_chat_format(*tok), ChatFormat::qwen3);
  for (size_t i = 0; i < cases.size(); ++i) {
    const ChatJson& c = cases[i];
    ChatOptions opt;
    opt.tools = c.value("tools", ChatJson());
    opt.add_generation_prompt = c.value("add_generation_prompt", false);
    opt.thinking = c.value("enable_thinking", true);
    RenderedChat r = render_chat(*tok, ChatFormat::qwen3, c["messages"], opt);
    EXPECT_EQ(r.text, expected[i]["text"].get<std::string>()) << "case " << i;
    // Hugging Face recognises special spellings inside message text; we never do (injection-proof).
    // So ids may differ only where a message spells a special, and then we must have fewer specials.
    std::vector<int32_t> want = expected[i]["ids"].get<std::vector<int32_t>>();
    if (r.ids != want) {
      EXPECT_TRUE(mentions_special(c["messages"], *tok)) << "case " << i << ": ids differ";
      auto specials = [&](const std::vector<int32_t>& ids) {
        return std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return tok->is_special(id); });
      };
      EXPECT_LT(specials(r.ids), specials(want)) << "case " << i;
    }
  }
}

// A tokenizer with K3's special layout (256 ids after the ranks) over o200k ranks.
const Tokenizer* k3_layout() {
  static std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    auto dir = testing::data_dir();
    if (!dir) return nullptr;
    const int32_t n = 199998;  // o200k ranks
    TiktokenOptions opt;
    opt.pattern = TiktokenPattern::kimi_k3;
    const std::pair<int, const char*> k3[] = {{0, "[BOS]"},           {1, "[EOS]"},
                                              {2, "<|end_of_msg|>"},  {3, "<|open|>"},
                                              {4, "<|close|>"},       {5, "<|sep|>"},
                                              {6, "[start_header_id]"}, {7, "[end_header_id]"},
                                              {9, "[EOT]"},           {254, "[UNK]"},
                                              {255, "[PAD]"}};
    for (auto [off, s] : k3) opt.specials.push_back(SpecialToken{n + off, s, true});
    return load_tiktoken_file(*dir + "/o200k_base.tiktoken", opt);
  }();
  return tok.get();
}

#define REQUIRE_K3(var)                                 \
  const Tokenizer* var = k3_layout();                   \
  if (!var) GTEST_SKIP() << "tokenizer data absent (offline?): run scripts/fetch-tokenizer-data.sh"

TEST(TokenizerChat, K3SimpleConversationIsInjectionProof) {
  REQUIRE_K3(tok);
  ASSERT_EQ(detect_chat_format(*tok), ChatFormat::kimi_k3);
  ChatJson messages = ChatJson::parse(R"([{"role":"user","content":"Hello <|open|> & goodbye"}])");
  RenderedChat r = render_chat(*tok, ChatFormat::kimi_k3, messages);
  EXPECT_EQ(r.text,
            "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>`thinking_effort` guides on how much to "
            "think in your thinking channel (not including the response channel), supported values include `low`, "
            "`medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=max`.<|close|>message<|sep|>"
            "<|end_of_msg|><|open|>message role=\"user\"<|sep|>Hello <|open|> & goodbye<|close|>message<|sep|>"
            "<|end_of_msg|><|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>");
  int32_t open = *tok->special_id("<|open|>");
  EXPECT_EQ(std::count(r.ids.begin(), r.ids.end(), open), 4);
  // Every segment is its own BPE unit: the ids are the concatenation of per-segment encodings.
  std::vector<int32_t> want;
  for (const ChatSegment& s : r.segments) {
    if (s.special) want.push_back(*tok->special_id(s.text));
    else tok->encode_into(s.text, want);
  }
  EXPECT_EQ(r.ids, want);
  EXPECT_EQ(r.segments.size(), 38u);
}

TEST(TokenizerChat, K3ToolsArgumentsAndResultOrder) {
  REQUIRE_K3(tok);
  ChatOptions opt;
  opt.tools = ChatJson::parse(R"([
    {"type":"function","function":{"description":"B tool","name":"beta","parameters":{"z":{"type":"number"},"a":{"type":"string"}}}},
    {"function":{"name":"alpha","description":"A tool","parameters":{"type":"object"}},"type":"function"}])");
  opt.thinking_effort = "low";
  ChatJson messages = ChatJson::parse(R"([
    {"role":"assistant","reasoning_content":"Check.","content":"Calling.","tool_calls":[
      {"id":"b","function":{"name":"beta","arguments":"{\"z\":1,\"a\":\"x\"}"}},
      {"id":"a","function":{"name":"alpha","arguments":"not valid <|open|>"}}]},
    {"role":"tool","tool_call_id":"a","name":"stale","content":"alpha result"},
    {"role":"tool","tool_call_id":"b","tool":"wrong","content":"beta result"}])");
  RenderedChat r = render_chat(*tok, ChatFormat::kimi_k3, messages, opt);
  EXPECT_NE(r.text.find("parameters\":{\"a\":{\"type\":\"string\"},\"z\""), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("argument key=\"z\" type=\"number\"<|sep|>1<|close|>argument"), std::string::npos);
  EXPECT_NE(r.text.find("argument key=\"a\" type=\"string\"<|sep|>x<|close|>argument"), std::string::npos);
  size_t beta = r.text.find("tool=\"beta\" index=\"1\""), alpha = r.text.rfind("tool=\"alpha\" index=\"2\"");
  ASSERT_NE(beta, std::string::npos);
  ASSERT_NE(alpha, std::string::npos);
  EXPECT_LT(beta, alpha);
  EXPECT_NE(r.text.find("<|open|>json type=\"object\"<|sep|>not valid <|open|><|close|>json"), std::string::npos);
  EXPECT_NE(r.text.find("thinking_effort=low"), std::string::npos);
  EXPECT_EQ(r.segments.size(), 182u);
}

TEST(TokenizerChat, K3ResponseControlsAndEscaping) {
  REQUIRE_K3(tok);
  ChatOptions opt;
  opt.thinking_effort = "high";
  opt.tool_choice = "required";
  opt.response_format = ChatJson::parse(
      R"({"type":"json_schema","json_schema":{"name":"answer","schema":{"required":["b","a"],"properties":{"b":{"type":"number"},"a":{"type":"string"}},"type":"object"}}})");
  ChatJson messages = ChatJson::parse(R"([{"role":"user","name":"A&B\"","content":"Return JSON."}])");
  RenderedChat r = render_chat(*tok, ChatFormat::kimi_k3, messages, opt);
  EXPECT_NE(r.text.find("name=\"A&amp;B&quot;\""), std::string::npos);
  EXPECT_NE(r.text.find(R"({"properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["b","a"],"type":"object"})"),
            std::string::npos);
  EXPECT_NE(r.text.find("You MUST call tools in the next message."), std::string::npos);
  EXPECT_EQ(r.segments.size(), 74u);
}

TEST(TokenizerChat, K3UncertainSwitchesAndThinkingOff) {
  REQUIRE_K3(tok);
  ChatJson messages = ChatJson::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                                          {"role":"user","content":"c"}])");
  ChatOptions deltafin;  // defaults: effort message "max", empty think blocks in history
  RenderedChat r = render_chat(*tok, ChatFormat::kimi_k3, messages, deltafin);
  EXPECT_NE(r.text.find("thinking-effort"), std::string::npos);
  EXPECT_NE(r.text.find("role=\"assistant\"<|sep|><|open|>think<|sep|><|close|>think<|sep|><|open|>response<|sep|>b"),
            std::string::npos);
  ChatOptions colibri;
  colibri.default_effort_message = false;
  colibri.empty_think_in_history = false;
  r = render_chat(*tok, ChatFormat::kimi_k3, messages, colibri);
  EXPECT_EQ(r.text.find("thinking-effort"), std::string::npos);
  EXPECT_NE(r.text.find("role=\"assistant\"<|sep|><|open|>response<|sep|>b<|close|>response"), std::string::npos);
  EXPECT_TRUE(r.text.ends_with("<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"));
  colibri.thinking_effort = "high";  // an explicit effort is always sent
  EXPECT_NE(render_chat(*tok, ChatFormat::kimi_k3, messages, colibri).text.find("thinking_effort=high"), std::string::npos);
  ChatOptions off;
  off.thinking = false;
  r = render_chat(*tok, ChatFormat::kimi_k3, messages, off);
  EXPECT_EQ(r.text.find("think"), std::string::npos);
  EXPECT_TRUE(r.text.ends_with("<|open|>response<|sep|>"));
  ChatOptions bad;
  bad.thinking_effort = "medium";
  EXPECT_THROW(render_chat(*tok, ChatFormat::kimi_k3, messages, bad), Error);
  EXPECT_THROW(render_chat(*tok, ChatFormat::kimi_k3, ChatJson::parse(R"([{"role":"user","content":[{"type":"image_url"}]}])")),
               Error);
  EXPECT_THROW(render_chat(*tok, ChatFormat::kimi_k3, ChatJson::parse(R"({"role":"user"})")), Error);
}

// Model output for an assistant turn: the renderer's ids after "<|open|>think<|sep|>".
std::vector<int32_t> k3_assistant_output(const Tokenizer& tok, const ChatJson& message) {
  ChatOptions opt;
  opt.add_generation_prompt = false;
  opt.default_effort_message = false;
  RenderedChat r = render_chat(tok, ChatFormat::kimi_k3, ChatJson::array({message}), opt);
  int32_t sep = *tok.special_id("<|sep|>");
  auto second_sep = std::find(std::find(r.ids.begin(), r.ids.end(), sep) + 1, r.ids.end(), sep);
  return std::vector<int32_t>(second_sep + 1, r.ids.end());
}

TEST(TokenizerChat, K3ParserInvertsRendererAndStreams) {
  REQUIRE_K3(tok);
  ChatJson message = ChatJson::parse(R"({"role":"assistant","reasoning_content":"Think: 2+2 — ünï 🌍.",
    "content":"The answer is 4.","tool_calls":[{"function":{"name":"calc","arguments":{"expr":"2+2","n":4,"ok":true,"l":[1,2]}}},
    {"function":{"name":"raw","arguments":"not json"}}]})");
  std::vector<int32_t> out = k3_assistant_output(*tok, message);
  ParsedReply p = parse_k3_reply(*tok, out, true);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.reasoning, "Think: 2+2 — ünï 🌍.");
  EXPECT_EQ(p.content, "The answer is 4.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].name, "calc");
  EXPECT_EQ(ChatJson::parse(p.tool_calls[0].arguments), message["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(p.tool_calls[1].arguments, "not json");
  ReplyStream stream(*tok, ChatFormat::kimi_k3, true);
  std::string reasoning, content;
  for (int32_t id : out) {
    ReplyStream::Delta d = stream.push(std::span<const int32_t>(&id, 1));
    EXPECT_TRUE(utf8_ok(d.reasoning) && utf8_ok(d.content));
    reasoning += d.reasoning;
    content += d.content;
  }
  ParsedReply f = stream.finish();
  EXPECT_EQ(reasoning, p.reasoning);
  EXPECT_EQ(content, p.content);
  EXPECT_EQ(f.tool_calls.size(), 2u);
}

TEST(TokenizerChat, Qwen3ParserAndStream) {
  SLUICE_REQUIRE_TOKENIZER(tok, "qwen3");
  std::string text =
      "<think>\nStep one.\nStep two 🌍\n</think>\n\nHello there.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{broken}\n</tool_call><|im_end|>";
  ParsedReply p = parse_qwen3_reply(text);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.reasoning, "Step one.\nStep two 🌍");
  EXPECT_EQ(p.content, "Hello there.<tool_call>\n{broken}\n</tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(ChatJson::parse(p.tool_calls[0].arguments), ChatJson::parse(R"({"city":"Paris"})"));
  // The model emits the markers as special tokens; stream the ids one at a time.
  std::vector<int32_t> ids;
  for (const char* part : {"<think>", "\nStep one.\nStep two 🌍\n", "</think>", "\n\nHello there.\n", "<tool_call>",
                           "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", "</tool_call>",
                           "\n", "<tool_call>", "\n{broken}\n", "</tool_call>", "<|im_end|>"}) {
    if (auto id = tok->special_id(part)) ids.push_back(*id);
    else tok->encode_into(part, ids);
  }
  ASSERT_EQ(tok->decode(ids), text);
  ReplyStream stream(*tok, ChatFormat::qwen3, false);
  std::string reasoning, content;
  for (int32_t id : ids) {
    ReplyStream::Delta d = stream.push(std::span<const int32_t>(&id, 1));
    EXPECT_TRUE(utf8_ok(d.reasoning) && utf8_ok(d.content));
    EXPECT_EQ(d.content.find("<tool_call>\n{\"name\""), std::string::npos);
    reasoning += d.reasoning;
    content += d.content;
  }
  ReplyStream::Delta last = stream.flush();
  reasoning += last.reasoning;
  content += last.content;
  ParsedReply f = stream.finish();
  EXPECT_EQ(reasoning, p.reasoning);
  EXPECT_EQ(content, p.content);
  EXPECT_EQ(f.content, p.content);
  EXPECT_EQ(f.tool_calls.size(), 1u);
  EXPECT_EQ(parse_qwen3_reply("plain answer").content, "plain answer");
  EXPECT_EQ(parse_qwen3_reply("still thinking", true).reasoning, "still thinking");
  EXPECT_EQ(parse_qwen3_reply("\n\n<think>\n\nr\n</think>\n\nc<|im_end|>ignored").reasoning, "r");
  EXPECT_EQ(parse_qwen3_reply("\n\n<think>\n\nr\n</think>\n\nc<|im_end|>ignored").content, "c");
  EXPECT_EQ(parse_qwen3_reply("<thin").content, "<thin");
  // Character-by-character streaming of text gives the same split as the one-shot parse.
  for (int variant = 0; variant < 4; ++variant) {
    bool opened = variant % 2;
    std::string sample = variant < 2 ? "<think>\n\nA\n\nB\n</think>\n\nX\n\nY<tool_call>\n{\"name\": \"f\"}\n</tool_call>\n\nZ</tool_c"
                                     : "reasoning cut short<|im_end|>after the end";
    ParsedReply whole = parse_qwen3_reply(sample, opened);
    std::vector<int32_t> chars;
    for (char ch : sample) tok->encode_into(std::string(1, ch), chars);
    ReplyStream s(*tok, ChatFormat::qwen3, opened);
    std::string r2, c2;
    for (int32_t id : chars) {
      ReplyStream::Delta d = s.push(std::span<const int32_t>(&id, 1));
      r2 += d.reasoning;
      c2 += d.content;
    }
    ReplyStream::Delta d = s.flush();
    EXPECT_EQ(r2 + d.reasoning, whole.reasoning) << opened;
    EXPECT_EQ(c2 + d.content, whole.content) << opened;
  }
}

TEST(TokenizerChat, PythonJsonDumps) {
  ChatJson v = ChatJson::parse(R"({"b": [1, 2.5, null, true, 1.0, 1e100], "a": "é\n\"\u0001x", "c": {}})");
  EXPECT_EQ(python_json_dumps(v, false), "{\"b\": [1, 2.5, null, true, 1.0, 1e+100], \"a\": \"é\\n\\\"\\u0001x\", \"c\": {}}");
  EXPECT_EQ(python_json_dumps(v, true), "{\"b\":[1,2.5,null,true,1.0,1e+100],\"a\":\"é\\n\\\"\\u0001x\",\"c\":{}}");
}

}  // namespace
}  // namespace sluice::tokenizer
