// Conversation state reuse and admission of the server: tape matching, the bounded FIFO line, and
// on a tiny model that a continued conversation reports its reused tokens and yields exactly the
// tokens a full prefill would.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "model_test_util.h"
#include "serve/admission.h"
#include "runtime/conversation.h"
#include "serve/service.h"

namespace sluice::serve {
namespace {

using runtime::reusable_prefix;
using runtime::tape_after;

TEST(ServeState, ReusablePrefixNeedsAStrictExtension) {
  std::vector<int32_t> tape = {1, 2, 3};
  EXPECT_EQ(reusable_prefix(tape, std::vector<int32_t>{1, 2, 3, 4}), 3u);
  EXPECT_EQ(reusable_prefix(tape, std::vector<int32_t>{1, 2, 3}), 0u);     // nothing new to feed
  EXPECT_EQ(reusable_prefix(tape, std::vector<int32_t>{1, 2}), 0u);        // shorter
  EXPECT_EQ(reusable_prefix(tape, std::vector<int32_t>{1, 9, 3, 4}), 0u);  // diverges: no partial reuse
  EXPECT_EQ(reusable_prefix({}, std::vector<int32_t>{1}), 0u);
  // The last generated token is pending (decided, not fed): it is not on the tape.
  EXPECT_EQ(tape_after(std::vector<int32_t>{1, 2}, std::vector<int32_t>{7, 8, 9}), (std::vector<int32_t>{1, 2, 7, 8}));
  EXPECT_EQ(tape_after(std::vector<int32_t>{1, 2}, std::vector<int32_t>{}), (std::vector<int32_t>{1, 2}));
}

TEST(ServeState, AdmissionIsBoundedAndFifo) {
  Admission a(2);
  auto t1 = a.try_enter(), t2 = a.try_enter(), t3 = a.try_enter();
  ASSERT_TRUE(t1 && t2 && t3);
  EXPECT_EQ(a.try_enter(), nullptr);  // one running + two waiting is the limit
  ASSERT_TRUE(t1->wait_turn({}));
  EXPECT_TRUE(a.busy());
  std::atomic<int> order{0};
  int got2 = 0, got3 = 0;
  std::thread w3([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(t3->wait_turn({}, 5));
    got3 = ++order;
    t3.reset();
  });
  std::thread w2([&] {
    ASSERT_TRUE(t2->wait_turn({}, 5));
    got2 = ++order;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    t2.reset();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  t1.reset();
  w2.join();
  w3.join();
  EXPECT_EQ(got2, 1);
  EXPECT_EQ(got3, 2);
  EXPECT_FALSE(a.busy());
  EXPECT_EQ(a.waiting(), 0u);

  // A waiter that gives up leaves the line and frees its place.
  auto r = a.try_enter();
  ASSERT_TRUE(r->wait_turn({}));
  auto q = a.try_enter();
  EXPECT_FALSE(q->wait_turn([] { return true; }, 1));
  q.reset();
  EXPECT_EQ(a.waiting(), 0u);
  auto q2 = a.try_enter(), q3 = a.try_enter();
  EXPECT_TRUE(q2 && q3);
}

// A byte-level tiktoken tokenizer (256 ranks + 256 reserved ids = the tiny model's 512) whose
// specials make the K3 chat format, with <|end_of_msg|> on the tiny model's eos id (509).
void write_tiny_k3_tokenizer(const std::string& dir) {
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::ofstream ranks(dir + "/tiktoken.model");
  for (int b = 0; b < 256; ++b)
    ranks << b64[b >> 2] << b64[(b & 3) << 4] << "== " << b << "\n";
  std::ofstream cfg(dir + "/tokenizer_config.json");
  cfg << R"({"added_tokens_decoder": {"256": {"content": "[BOS]", "special": true},
    "257": {"content": "[EOS]", "special": true}, "258": {"content": "<|open|>", "special": true},
    "259": {"content": "<|close|>", "special": true}, "260": {"content": "<|sep|>", "special": true},
    "509": {"content": "<|end_of_msg|>", "special": true}}})";
}

class ServeTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("serve");
    model::write_tiny_checkpoint(testing::tiny_k3_spec(), dir_->str());
    write_tiny_k3_tokenizer(dir_->str());
  }
  static void TearDownTestSuite() { delete dir_; }
  static testing::TempDir* dir_;
};
testing::TempDir* ServeTiny::dir_ = nullptr;

std::string completion(const std::string& prompt, int max_tokens) {
  return Json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}.dump();
}

// Admission runs after validation and before tokenizing: a refused request costs no tokenization
// (its over-long prompt is not even measured), and an invalid one is a 400 without taking a place;
// a chat without max_tokens gets --default-max-tokens.
TEST_F(ServeTiny, AdmissionComesBeforeTokenizing) {
  ServeOptions o;
  o.engine.model_dir = dir_->str();
  o.model_id = "tiny";
  o.max_context = 4096;
  o.default_max_tokens = 3;
  Service s(o);
  int admitted = 0;
  auto refuse = [&] {
    ++admitted;
    throw ApiError(429, "busy", "rate_limit_error");
  };
  const std::string too_long = completion(std::string(100000, 'a'), 1);
  try {
    s.prepare_completion(too_long, refuse);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 429);
  }
  EXPECT_EQ(admitted, 1);
  try {
    s.prepare_completion(R"({"model":"tiny","prompt":"x","max_tokens":"many"})", refuse);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
  }
  EXPECT_EQ(admitted, 1);
  auto admit = [&] { ++admitted; };
  EXPECT_THROW(s.prepare_completion(too_long, admit), ApiError);  // admitted, then the context check
  EXPECT_EQ(admitted, 2);
  const std::string chat = R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"ignore_eos":true})";
  PreparedRequest p = s.prepare_chat(chat, admit);
  EXPECT_EQ(admitted, 3);
  EXPECT_EQ(p.max_new, 3);
}

TEST_F(ServeTiny, ContinuedConversationReusesStateExactly) {
  // Without the prefix cache only the session's last tape is reused; with it (the default), the
  // state at the end of an earlier prompt comes back after other requests.
  for (double prefix_cache_gb : {0.0, 2.0}) {
    SCOPED_TRACE(prefix_cache_gb);
    const bool cache = prefix_cache_gb > 0;
    ServeOptions o;
    o.engine.model_dir = dir_->str();
    o.engine.prefix_cache_gb = prefix_cache_gb;
    o.model_id = "tiny";
    Service s(o);
    auto run = [&](const std::string& body) {
      auto p = s.prepare_completion(body);
      return s.run(p, {}, [] { return false; });
    };
    // One generated token leaves exactly the prompt on the tape; an extension of it is reused.
    Json first = run(completion("The quick brown fox", 1));
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    Json reused = run(completion("The quick brown fox jumps over", 8));
    EXPECT_EQ(reused["usage"]["prompt_tokens_details"]["cached_tokens"], 19);
    EXPECT_EQ(reused["usage"]["prompt_tokens"], 30);
    // Something else moves the state away; the same request then prefills everything (or, with the
    // prefix cache, all but what follows the first prompt) and must agree.
    run(completion("Unrelated", 2));
    Json fresh = run(completion("The quick brown fox jumps over", 8));
    EXPECT_EQ(fresh["usage"]["prompt_tokens_details"]["cached_tokens"], cache ? 19 : 0);
    EXPECT_EQ(fresh["choices"][0]["text"], reused["choices"][0]["text"]);
    EXPECT_EQ(fresh["usage"]["completion_tokens"], reused["usage"]["completion_tokens"]);
    // A cancelled generation leaves no reusable tape behind (the prefix cache still has the state
    // at the end of the earlier prompt it extends).
    auto p = s.prepare_completion(completion("The quick brown fox jumps over the lazy dog", 4));
    EXPECT_THROW(s.run(p, {}, [] { return true; }), ClientGone);
    Json after = run(completion("The quick brown fox jumps over the lazy dog!", 2));
    EXPECT_EQ(after["usage"]["prompt_tokens_details"]["cached_tokens"], cache ? 30 : 0);
  }
}

TEST_F(ServeTiny, ChatStreamMatchesJsonAndContinuationIsReused) {
  ServeOptions o;
  o.engine.model_dir = dir_->str();
  o.model_id = "tiny";
  Service s(o);
  Json msgs = Json::array({Json{{"role", "user"}, {"content", "hello"}}});
  auto body = [&](const Json& m) {
    return Json{{"model", "tiny"}, {"messages", m}, {"max_tokens", 6}, {"temperature", 0}}.dump();
  };
  Json a = s.run(s.prepare_chat(body(msgs)), {}, [] { return false; });
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Streaming the same request gives the same text, chunk by chunk, and the usage chunk.
  std::string events;
  Json streamed = Json::parse(body(msgs));
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  Json none = s.run(s.prepare_chat(streamed.dump()), [&](const std::string& e) { events += e; return true; },
                    [] { return false; });
  EXPECT_TRUE(none.is_null());
  std::string reasoning, content;
  Json usage;
  size_t pos = 0;
  int done = 0;
  while ((pos = events.find("data: ", pos)) != std::string::npos) {
    size_t end = events.find("\n\n", pos);
    std::string payload = events.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") { ++done; continue; }
    Json c = Json::parse(payload);
    if (!c["usage"].is_null()) usage = c["usage"];
    if (c["choices"].empty()) continue;
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(done, 1);
  EXPECT_EQ(content, a["choices"][0]["message"]["content"]);
  EXPECT_EQ(reasoning, a["choices"][0]["message"].value("reasoning_content", ""));
  EXPECT_EQ(usage["completion_tokens"], a["usage"]["completion_tokens"]);

  // A one-token reply leaves the rendered prompt (ending in the assistant's opened think block) on
  // the tape; the next turn, which re-renders that assistant message, extends it.
  auto with_max = [&](const Json& m, int n) {
    return Json{{"model", "tiny"}, {"messages", m}, {"max_tokens", n}, {"temperature", 0}}.dump();
  };
  Json one = s.run(s.prepare_chat(with_max(msgs, 1)), {}, [] { return false; });
  Json next = msgs;
  next.push_back(Json{{"role", "assistant"}, {"reasoning_content", "thinking"}, {"content", "hi"}});
  next.push_back(Json{{"role", "user"}, {"content", "and then?"}});
  Json two = s.run(s.prepare_chat(with_max(next, 4)), {}, [] { return false; });
  EXPECT_EQ(two["usage"]["prompt_tokens_details"]["cached_tokens"], one["usage"]["prompt_tokens"]);
  EXPECT_GT(two["usage"]["prompt_tokens"].get<int64_t>(), one["usage"]["prompt_tokens"].get<int64_t>());
}

// A stream that stays silent while it generates (a withheld tool call) gets an SSE comment every
// heartbeat_ms; a client that left is noticed on it. With heartbeat_ms 0 a comment follows every
// token: the stream minus its comments is the stream without them, and a comment the client no
// longer takes ends the generation at once (ClientGone), after which the service is exact again.
TEST_F(ServeTiny, SilentStreamsGetCommentsAndAGoneClientIsNoticedOnOne) {
  auto completion_stream = [](int max_tokens) {
    return Json{{"model", "tiny"}, {"prompt", "The quick brown fox"}, {"max_tokens", max_tokens}, {"temperature", 0},
                {"ignore_eos", true}, {"stream", true}}.dump();
  };
  auto stream = [&](Service& s, int max_tokens) {
    std::string events;
    s.run(s.prepare_completion(completion_stream(max_tokens)), [&](const std::string& e) { events += e; return true; },
          [] { return false; });
    return events;
  };
  ServeOptions o;
  o.engine.model_dir = dir_->str();
  o.model_id = "tiny";
  o.state_reuse = false;
  Service quiet(o);
  const std::string plain = stream(quiet, 8);
  o.heartbeat_ms = 0;
  Service chatty(o);
  std::string with = stream(chatty, 8);
  size_t comments = 0;
  for (size_t pos = 0; (pos = with.find(": keep-alive\n\n", pos)) != std::string::npos;) {
    with.erase(pos, 14);
    ++comments;
  }
  EXPECT_EQ(comments, 8u);
  // The ids and created times differ between the two services' replies; the text does not.
  auto texts = [](const std::string& events) {
    std::string text;
    for (size_t pos = 0; (pos = events.find("data: {", pos)) != std::string::npos;) {
      const size_t end = events.find("\n\n", pos);
      const Json c = Json::parse(events.substr(pos + 6, end - pos - 6));
      text += c["choices"][0].value("text", "");
      pos = end;
    }
    return text;
  };
  EXPECT_EQ(texts(with), texts(plain));
  EXPECT_EQ(with.substr(with.size() - 14), "data: [DONE]\n\n");
  // The client is gone: its first comment fails, and no more tokens are generated for it.
  int64_t writes = 0;
  auto p = chatty.prepare_completion(completion_stream(64));
  EXPECT_THROW(chatty.run(p, [&](const std::string& e) { ++writes; return e[0] != ':'; }, [] { return false; }),
               ClientGone);
  EXPECT_LE(writes, 3);  // at most the first token's chunk (and a role chunk) before the comment
  EXPECT_EQ(texts(stream(chatty, 8)), texts(plain));
}

// The Anthropic route on the same service: a streamed reply's blocks equal the whole message's,
// and a next turn that sends the reply back as thinking and text blocks continues the kept state
// (reported as cache_read_input_tokens). The telemetry sample counts what was generated.
TEST_F(ServeTiny, MessagesStreamMatchesJsonAndContinuationIsReused) {
  ServeOptions o;
  o.engine.model_dir = dir_->str();
  o.model_id = "tiny";
  Service s(o);
  auto body = [](const Json& messages, int max_tokens, bool stream) {
    return Json{{"model", "tiny"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream},
                {"messages", messages}}.dump();
  };
  const Json hello = Json::array({Json{{"role", "user"}, {"content", "hello"}}});
  Json a = s.run(s.prepare_messages(body(hello, 6, false)), {}, [] { return false; });
  EXPECT_EQ(a["type"], "message");
  EXPECT_EQ(a["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_TRUE(a["stop_reason"] == "max_tokens" || a["stop_reason"] == "end_turn");
  EXPECT_LE(a["usage"]["output_tokens"].get<int64_t>(), 6);
  std::string events;
  Json none = s.run(s.prepare_messages(body(hello, 6, true)), [&](const std::string& e) { events += e; return true; },
                    [] { return false; });
  EXPECT_TRUE(none.is_null());
  Json blocks = Json::array(), usage;
  std::string last;
  for (size_t pos = 0; (pos = events.find("data: ", pos)) != std::string::npos;) {
    size_t end = events.find("\n\n", pos);
    Json e = Json::parse(events.substr(pos + 6, end - pos - 6));
    pos = end;
    last = e["type"];
    if (last == "content_block_start") blocks.push_back(e["content_block"]);
    if (last == "content_block_delta") {
      Json& b = blocks[e["index"].get<size_t>()];
      const char* field = e["delta"]["type"] == "thinking_delta" ? "thinking" : "text";
      b[field] = b[field].get<std::string>() + e["delta"][field].get<std::string>();
    }
    if (last == "message_delta") usage = e["usage"];
  }
  EXPECT_EQ(last, "message_stop");
  EXPECT_EQ(blocks, a["content"]);
  EXPECT_EQ(usage["output_tokens"], a["usage"]["output_tokens"]);

  // One token leaves the rendered prompt on the tape; the next turn re-renders it and extends it.
  Json one = s.run(s.prepare_messages(body(hello, 1, false)), {}, [] { return false; });
  Json next = hello;
  next.push_back(Json{{"role", "assistant"},
                      {"content", Json::array({Json{{"type", "thinking"}, {"thinking", "thinking"}, {"signature", ""}},
                                               Json{{"type", "text"}, {"text", "hi"}}})}});
  next.push_back(Json{{"role", "user"}, {"content", "and then?"}});
  Json two = s.run(s.prepare_messages(body(next, 4, false)), {}, [] { return false; });
  const int64_t first_prompt = one["usage"]["input_tokens"].get<int64_t>() + one["usage"]["cache_read_input_tokens"].get<int64_t>();
  EXPECT_EQ(two["usage"]["cache_read_input_tokens"], first_prompt);
  EXPECT_GT(two["usage"]["input_tokens"].get<int64_t>(), 0);

  TelemetrySample t = s.telemetry_sample();
  EXPECT_EQ(t.completed, 4);
  EXPECT_GE(t.tokens, 4);
  EXPECT_FALSE(t.streaming);
  EXPECT_FALSE(t.generating);
}

TEST_F(ServeTiny, DSparkDraftingGivesTheSameRepliesOnReusedAndResetStates) {
  testing::TempDir ds("serve-dspark");
  model::write_tiny_dspark({}, model::load_kimi_config(dir_->str()), ds.str());
  auto replies = [&](const std::string& draft) {
    ServeOptions o;
    o.engine.model_dir = dir_->str();
    o.model_id = "tiny";
    o.engine.draft = draft;
    Service s(o);
    std::vector<Json> out;
    // One token leaves the prompt as the tape, so the extension reuses the state (the drafter's
    // cache continues from it); "Unrelated" resets both.
    for (auto [prompt, n] : {std::pair{"The quick brown fox", 1}, {"The quick brown fox jumps over", 8},
                             {"Unrelated", 2}, {"The quick brown fox jumps over", 8}})
      out.push_back(s.run(s.prepare_completion(completion(prompt, n)), {}, [] { return false; }));
    return out;
  };
  auto off = replies("off"), on = replies("dspark:" + ds.str());
  ASSERT_EQ(on.size(), off.size());
  EXPECT_EQ(on[1]["usage"]["prompt_tokens_details"]["cached_tokens"], 19);
  for (size_t i = 0; i < on.size(); ++i) {
    EXPECT_EQ(on[i]["choices"][0]["text"], off[i]["choices"][0]["text"]) << "request " << i;
    EXPECT_EQ(on[i]["usage"], off[i]["usage"]) << "request " << i;
  }
}

}  // namespace
}  // namespace sluice::serve
