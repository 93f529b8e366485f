// Guided replies on the built-in default model (Kimi K3 format): with tool_choice required, every
// reply the model finishes is one or more tool calls that K3's own reply parser recovers, naming
// a given tool, with arguments valid against that tool's schema, checked by an independent
// validator (python-jsonschema, tools/guide_schema_check.py); response_format replies are JSON
// valid against their schema. Greedy and sampled, over 20 tool schemas of the kinds coding agents
// send. The target chooses every token among the allowed ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "guide/json_schema.h"
#include "model_test_util.h"
#include "serve_test_util.h"
#include "runtime/engine.h"
#include "runtime/grammar_constraint.h"
#include "runtime/guided_reply.h"
#include "tokenizer/chat.h"

namespace sluice {
namespace {

using Json = nlohmann::ordered_json;

const std::string kTarget = std::string(SLUICE_SOURCE_DIR) + "/models/default/target";

// Twenty parameter schemas: strings, numbers, enums, nesting, arrays, optional fields, anyOf,
// const, formats, $ref and none at all (tests/fixtures/guided/agent_tools.json, which
// bench/tool_calls.py sends to a server too).
std::vector<runtime::GuidedTool> agent_tools() {
  const std::string path = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/guided/agent_tools.json";
  std::ifstream in(path);
  const Json list = Json::parse(in);
  std::vector<runtime::GuidedTool> tools;
  for (const Json& t : list) tools.push_back({t.at("name").get<std::string>(), t.at("parameters")});
  return tools;
}

Json openai_tools(const std::vector<runtime::GuidedTool>& tools) {
  Json out = Json::array();
  for (const auto& t : tools) {
    Json fn = {{"name", t.name}, {"description", "Calls " + t.name + "."}};
    fn["parameters"] = t.parameters.is_null() ? Json{{"type", "object"}} : t.parameters;
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

class GuidedReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::EngineOptions eo;
    eo.model_dir = kTarget;
    eo.draft = "off";
    engine_ = runtime::Engine::load(eo);
    tok_ = engine_->tokenizer();
  }
  // Generates a reply to `user` under `guided`; its ids.
  runtime::GenerateResult generate(const std::string& user, const Json& tools, const runtime::GuidedReply& guided,
                                   double temperature, uint64_t seed, int64_t max_new, bool thinking = false) {
    tokenizer::ChatOptions co;
    co.thinking = thinking;
    co.tools = tools;
    const Json messages = Json::array({{{"role", "user"}, {"content", user}}});
    const auto rendered = tokenizer::render_chat(*tok_, tokenizer::ChatFormat::kimi_k3, messages, co);
    runtime::GrammarConstraint constraint(engine_->guide_vocabulary(), guided.grammar, engine_->info().eos_token_ids,
                                          guided.starts_after);
    runtime::GenerateOptions o{.max_new = max_new, .constraint = &constraint};
    o.sampling = {.temperature = temperature, .seed = seed};
    auto session = engine_->new_session(false);
    return session->generate(rendered.ids, o);
  }
  std::unique_ptr<runtime::Engine> engine_;
  const tokenizer::Tokenizer* tok_ = nullptr;
};

// Writes schema and documents for tools/guide_schema_check.py; false when a document is invalid.
// Skips (returns true, sets *ran false) when python3 with jsonschema is missing.
bool independently_valid(const Json& schema, const std::vector<std::string>& docs, const std::string& tag, bool* ran) {
  *ran = std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") == 0;
  if (!*ran || docs.empty()) return true;
  const auto dir = std::filesystem::temp_directory_path() / ("sluice-guided-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto s = dir / (tag + ".schema.json"), d = dir / (tag + ".jsonl");
  std::ofstream(s) << (schema.is_null() ? Json{{"type", "object"}} : schema).dump();
  {
    std::ofstream out(d);
    for (const auto& doc : docs) out << Json::parse(doc).dump() << "\n";  // one line each, the same value
  }
  const std::string cmd = "python3 '" + std::string(SLUICE_SOURCE_DIR) + "/tools/guide_schema_check.py' '" +
                          s.string() + "' '" + d.string() + "' >'" + (dir / (tag + ".out")).string() + "' 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  if (!ok) {
    std::ifstream in(dir / (tag + ".out"));
    std::cerr << in.rdbuf();
  }
  std::filesystem::remove_all(dir);
  return ok;
}

// Every call K3's parser recovers, from finished replies and from replies cut at max_new (the
// calls completed before the cut), names an offered tool and has schema-valid arguments. One
// call per reply (parallel_tool_calls false) and any number; each tool offered alone, and five
// times all twenty at once.
TEST_F(GuidedReplyTest, RequiredToolCallsParseAndMatchTheirSchemas) {
  const auto tools = agent_tools();
  ASSERT_EQ(tools.size(), 20u);
  int runs = 0, finished = 0, calls = 0;
  bool ran = false;
  std::map<std::string, std::vector<std::string>> args_by_tool;
  for (size_t i = 0; i < tools.size(); ++i) {
    for (bool all : {false, true}) {
      if (all && i % 4 != 0) continue;
      const std::vector<runtime::GuidedTool> offered = all ? tools : std::vector<runtime::GuidedTool>{tools[i]};
      const bool parallel = i % 2 == 1;
      const auto guided = runtime::guided_tool_calls(*tok_, tokenizer::ChatFormat::kimi_k3, false, offered, parallel);
      for (double temperature : {0.0, 1.0}) {
        const auto r = generate("Please use " + tools[i].name + " now.", openai_tools(offered), guided, temperature,
                                100 + i, 200);
        ++runs;
        const auto reply = tokenizer::parse_reply(*tok_, tokenizer::ChatFormat::kimi_k3, r.generated);
        EXPECT_EQ(reply.content, "");
        if (r.stop_reason == "eos") {
          ++finished;
          EXPECT_TRUE(reply.complete);
          EXPECT_FALSE(reply.tool_calls.empty()) << tok_->decode(r.generated);
          if (!parallel) {
            EXPECT_EQ(reply.tool_calls.size(), 1u);
          }
        } else if (std::getenv("SLUICE_GUIDED_SHOW")) {
          std::printf("[unfinished] %s\n", tok_->decode(r.generated).c_str());
        }
        for (const auto& call : reply.tool_calls) {
          ++calls;
          const auto named = std::find_if(offered.begin(), offered.end(), [&](const auto& t) { return t.name == call.name; });
          ASSERT_NE(named, offered.end()) << "called " << call.name;
          const auto args = Json::parse(call.arguments, nullptr, false);
          ASSERT_FALSE(args.is_discarded()) << call.arguments;
          ASSERT_TRUE(args.is_object()) << call.arguments;
          args_by_tool[call.name].push_back(call.arguments);
        }
      }
    }
  }
  for (const auto& [name, docs] : args_by_tool) {
    const auto t = std::find_if(tools.begin(), tools.end(), [&](const auto& x) { return x.name == name; });
    EXPECT_TRUE(independently_valid(t->parameters, docs, name, &ran)) << name;
  }
  std::printf("[guided] %d replies (%d finished), %d calls of %zu tools, independent validator %s\n", runs, finished,
              calls, args_by_tool.size(), ran ? "ran" : "missing (python3 jsonschema)");
  EXPECT_GE(calls, runs);          // about one call a reply at least, even with cuts
  EXPECT_GE(args_by_tool.size(), 15u);  // most tools were called
}

// Random token walks through the guided reply grammars of both formats (no model: a random
// choice among the allowed tokens at every step, ending where allowed half the time), parsed back
// by each format's own reply parser: the grammar writes exactly the syntax the parser reads, with
// and without a reasoning block before it.
// A random walk through a guided grammar: from every state a token the constraint allows, chosen
// at random (the end token half the time it is allowed), after the reasoning a format writes
// first when `thinking` ("let me think", then what ends it). Returns the ids, ending in `end`.
struct Walker {
  const tokenizer::Tokenizer* tok;
  tokenizer::ChatFormat format;
  int32_t end;

  std::vector<int32_t> encode(const std::string& text) const {
    std::vector<int32_t> ids;
    for (char ch : text) ids.push_back(tok->encode(std::string(1, ch))[0]);
    return ids;
  }
  std::vector<int32_t> walk(const std::shared_ptr<const guide::Vocabulary>& vocab, const runtime::GuidedReply& guided,
                            bool thinking, uint64_t seed) const {
    runtime::GrammarConstraint walk(vocab, guided.grammar, {end}, guided.starts_after);
    std::vector<int32_t> ids;
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> bits(size_t((vocab->size() + 63) / 64));
    if (thinking) {
      if (format == tokenizer::ChatFormat::gpt_oss) {  // an analysis message, inside the grammar
        auto lit = [&](const char* s) { ids.push_back(*tok->special_id(s)); };
        lit("<|channel|>");
        for (int32_t t : encode("analysis")) ids.push_back(t);
        lit("<|message|>");
        for (int32_t t : encode("let me think")) ids.push_back(t);
        lit("<|end|>");
        lit("<|start|>");
        for (int32_t t : encode("assistant")) ids.push_back(t);
      } else {  // free text, then the token that ends it
        ids = encode("let me think");
        ids.push_back(guided.starts_after);
      }
      for (int32_t t : ids) {
        EXPECT_TRUE(walk.allows(t)) << tok->decode(std::span<const int32_t>(&t, 1));
        walk.accept(t);
      }
      // Qwen3 and Kimi K2 Thinking write <think> themselves (K3's prompt opens it).
      if (format == tokenizer::ChatFormat::qwen3 || format == tokenizer::ChatFormat::kimi_k2_thinking)
        ids.insert(ids.begin(), *tok->special_id("<think>"));
    }
    for (int step = 0; step < 20000; ++step) {
      walk.allowed(bits);
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab->size(); ++t)
        if (runtime::bit(bits, t)) ok.push_back(t);
      if (ok.empty()) {
        ADD_FAILURE() << "no token allowed after " << tok->decode(ids);
        break;
      }
      int32_t t = ok[rng() % ok.size()];
      if (runtime::bit(bits, end) && rng() % 2 == 0) t = end;
      walk.accept(t);
      ids.push_back(t);
      if (t == end) break;
    }
    EXPECT_EQ(ids.back(), end) << "the walk did not end";
    return ids;
  }
  tokenizer::ParsedReply parse(const std::vector<int32_t>& ids, bool thinking) const {
    tokenizer::ChatOptions co;
    co.thinking = thinking;
    return tokenizer::parse_reply(*tok, format, ids, tokenizer::prompt_opens_think(format, co));
  }
  // Which `thinking` a request can have in this format: both, or the one the model always has.
  std::vector<bool> thinking_modes() const {
    switch (format) {
      case tokenizer::ChatFormat::kimi_k3:
      case tokenizer::ChatFormat::qwen3:
      case tokenizer::ChatFormat::gpt_oss: return {false, true};  // gpt-oss: with and without analysis
      case tokenizer::ChatFormat::kimi_k2_thinking: return {true};
      default: return {false};
    }
  }
  // The reasoning a walk should parse back to (gpt-oss walks may add analysis messages of their own).
  void expect_reasoning(const tokenizer::ParsedReply& reply, bool thinking, const std::string& text) const {
    if (format == tokenizer::ChatFormat::gpt_oss) {
      if (thinking) {
        EXPECT_EQ(reply.reasoning.rfind("let me think", 0), 0u) << text;
      }
    } else {
      EXPECT_EQ(reply.reasoning, thinking ? "let me think" : "") << text;
    }
  }
};

std::vector<Walker> every_format_walker(const tokenizer::Tokenizer* k3, const tokenizer::Tokenizer* all) {
  using F = tokenizer::ChatFormat;
  return {{k3, F::kimi_k3, *k3->special_id("<|end_of_msg|>")},
          {all, F::qwen3, *all->special_id("<|im_end|>")},
          {all, F::kimi_k2, *all->special_id("<|im_end|>")},
          {all, F::kimi_k2_thinking, *all->special_id("<|im_end|>")},
          {all, F::deepseek_v3, *all->special_id("<｜end▁of▁sentence｜>")},
          {all, F::deepseek_v3_0324, *all->special_id("<｜end▁of▁sentence｜>")},
          {all, F::gpt_oss, *all->special_id("<|call|>")}};
}

TEST_F(GuidedReplyTest, RandomWalksThroughEveryFormatsGrammarParseBack) {
  const auto tools = agent_tools();
  auto all = serve::byte_all_formats_tokenizer();
  bool ran = false;
  // Arguments by tool over every format: one validator run per tool.
  std::map<std::string, std::vector<std::string>> args_by_tool;
  for (const Walker& c : every_format_walker(tok_, all.get())) {
    auto vocab = runtime::guide_vocabulary(*c.tok, c.tok->vocab_size());
    std::set<std::string> called;
    int walks = 0, calls = 0;
    for (bool thinking : c.thinking_modes()) {
      for (size_t i = 0; i < tools.size(); ++i) {
        const std::vector<runtime::GuidedTool> offered = {tools[i], tools[(i + 7) % tools.size()]};
        const auto guided = runtime::guided_tool_calls(*c.tok, c.format, thinking, offered, i % 2 == 0);
        const auto ids = c.walk(vocab, guided, thinking, 1000 * size_t(thinking) + i);
        ++walks;
        const std::string text = c.tok->decode(ids);
        const auto reply = c.parse(ids, thinking);
        EXPECT_TRUE(reply.complete) << text;
        EXPECT_EQ(reply.content, "") << text;
        c.expect_reasoning(reply, thinking, text);
        ASSERT_FALSE(reply.tool_calls.empty()) << text;
        if (i % 2 == 1) {
          EXPECT_EQ(reply.tool_calls.size(), 1u);
        }
        for (const auto& call : reply.tool_calls) {
          ++calls;
          ASSERT_TRUE(call.name == offered[0].name || call.name == offered[1].name) << call.name;
          const auto args = Json::parse(call.arguments, nullptr, false);
          ASSERT_TRUE(!args.is_discarded() && args.is_object()) << call.arguments;
          args_by_tool[call.name].push_back(call.arguments);
          called.insert(call.name);
        }
      }
    }
    std::printf("[guided walk] %s: %d replies, %d calls of %zu tools\n", tokenizer::chat_format_name(c.format), walks,
                calls, called.size());
    EXPECT_EQ(walks, int(20 * c.thinking_modes().size()));
  }
  for (const auto& [name, docs] : args_by_tool) {
    const auto t = std::find_if(tools.begin(), tools.end(), [&](const auto& x) { return x.name == name; });
    EXPECT_TRUE(independently_valid(t->parameters, docs, "walk-" + name, &ran)) << name;
  }
}

// The content grammars (response_format json_schema) of every format, walked the same way: the
// format's parser gives content that is JSON valid against the schema, and nothing else.
TEST_F(GuidedReplyTest, RandomWalksThroughEveryFormatsContentGrammarParseBack) {
  const auto tools = agent_tools();
  auto all = serve::byte_all_formats_tokenizer();
  bool ran = false;
  std::map<size_t, std::vector<std::string>> docs_by_schema;  // one validator run per schema
  for (const Walker& c : every_format_walker(tok_, all.get())) {
    // Content ends where the format's answer ends: gpt-oss's final message with <|return|>.
    Walker w = c;
    if (c.format == tokenizer::ChatFormat::gpt_oss) w.end = *c.tok->special_id("<|return|>");
    auto vocab = runtime::guide_vocabulary(*c.tok, c.tok->vocab_size());
    int walks = 0;
    for (bool thinking : c.thinking_modes()) {
      for (size_t i = 0; i < tools.size(); i += 3) {
        const Json schema = tools[i].parameters.is_null() ? Json{{"type", "object"}} : tools[i].parameters;
        const auto guided = runtime::guided_reply(*c.tok, c.format, thinking, guide::json_schema_gbnf(schema, "content-"));
        const auto ids = w.walk(vocab, guided, thinking, 7000 + 1000 * size_t(thinking) + i);
        ++walks;
        const std::string text = c.tok->decode(ids);
        const auto reply = w.parse(ids, thinking);
        EXPECT_TRUE(reply.complete) << text;
        EXPECT_TRUE(reply.tool_calls.empty()) << text;
        w.expect_reasoning(reply, thinking, text);
        const auto doc = Json::parse(reply.content, nullptr, false);
        ASSERT_FALSE(doc.is_discarded()) << reply.content;
        docs_by_schema[i].push_back(reply.content);
      }
    }
    std::printf("[guided walk] %s: %d JSON replies\n", tokenizer::chat_format_name(c.format), walks);
  }
  for (const auto& [i, docs] : docs_by_schema) {
    const Json schema = tools[i].parameters.is_null() ? Json{{"type", "object"}} : tools[i].parameters;
    EXPECT_TRUE(independently_valid(schema, docs, cat("content-", tools[i].name), &ran)) << tools[i].name;
  }
}

TEST_F(GuidedReplyTest, ResponseFormatRepliesAreSchemaValidJson) {
  const Json schema = Json::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},"email":{"type":["string","null"]}},"required":["name","age"],"additionalProperties":false})");
  std::vector<std::string> docs;
  int runs = 0;
  for (bool thinking : {false}) {
    const auto guided = runtime::guided_reply(*tok_, tokenizer::ChatFormat::kimi_k3, thinking,
                                              guide::json_schema_gbnf(schema, "content-"));
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const auto r = generate("Describe a person.", nullptr, guided, seed == 0 ? 0.0 : 1.0, seed, 300, thinking);
      ++runs;
      if (r.stop_reason != "eos") continue;
      const auto reply = tokenizer::parse_reply(*tok_, tokenizer::ChatFormat::kimi_k3, r.generated);
      EXPECT_TRUE(reply.complete);
      EXPECT_TRUE(reply.tool_calls.empty());
      const auto doc = Json::parse(reply.content, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << reply.content;
      docs.push_back(reply.content);
    }
  }
  EXPECT_GE(docs.size(), size_t(runs) * 3 / 4);
  bool ran = false;
  EXPECT_TRUE(independently_valid(schema, docs, "person", &ran));
}

}  // namespace
}  // namespace sluice
