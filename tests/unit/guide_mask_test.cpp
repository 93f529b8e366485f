// guide/token_mask: masks must equal a brute-force per-token check (copy the matcher, feed the
// token) on random vocabularies and random grammar states, with and without a reused cache; and
// random generation driven by the masks must end in valid sentences; masks answered from the
// cache's memo of whole masks (hits, and after evictions) must equal fresh walks; masks walked in
// shares on several threads (ParallelMasks) must equal them too.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "error_of.h"
#include "guide/grammar.h"
#include "guide/json_schema.h"
#include "guide/token_mask.h"
#include "guide_sample.h"

namespace {

using sluice::guide::Grammar;
using sluice::guide::MaskCache;
using sluice::guide::Matcher;
using sluice::guide::Vocabulary;

// Pieces that JSON text is made of, plus UTF-8 cut at every byte, so tokens often end or start
// inside a code point as byte-level BPE tokens do.
const std::vector<std::string> kPieces = {
    "{", "}", "[", "]", ",", ":", "\"", " ", "\n", "  ", "\t", "\\", "\\n", "\\u00", "\\ud83d", "\\ude00", "true",
    "false", "null", "nu", "0", "1", "7", "-", ".", "e", "E", "+", "12", "3.5", "name", "age", "kind", "adult",
    "tags", "a", "b", "x", "é", "\xC3", "\xA9", "€", "\xE2\x82", "\xAC", "😀", "\xF0\x9F", "\x98\x80", "\x01",
    "\x7F", "\xFF", "<", ">", "sum", "city",
};

struct TestVocab {
  std::vector<std::string> text;
  std::vector<bool> special;
  std::unique_ptr<Vocabulary> vocab;
};

TestVocab random_vocab(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TestVocab v;
  for (int b = 0; b < 256; ++b) v.text.push_back(std::string(1, char(b)));  // every byte, as BPE has
  while (v.text.size() < n) {
    std::string t;
    const int parts = 1 + int(rng() % 4);
    for (int i = 0; i < parts; ++i) t += kPieces[rng() % kPieces.size()];
    v.text.push_back(t);
  }
  v.text.push_back(v.text[300]);  // a duplicate
  v.text.push_back("");           // an empty token
  v.special.assign(v.text.size(), false);
  for (int i = 0; i < 8; ++i) {  // specials, one of them with bytes that must not count
    v.text.push_back(i == 0 ? "{" : "");
    v.special.push_back(true);
  }
  std::vector<std::string_view> views(v.text.begin(), v.text.end());
  v.vocab = std::make_unique<Vocabulary>(views, v.special);
  return v;
}

std::vector<uint64_t> brute_force(const Vocabulary& vocab, const Matcher& m) {
  std::vector<uint64_t> bits((size_t(vocab.size()) + 63) / 64, 0);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    bool ok = false;
    if (!vocab.special(id) && !vocab.bytes(id).empty()) {
      Matcher c = m;
      ok = c.accept_bytes(vocab.bytes(id));
    }
    if (!ok) {
      Matcher c = m;
      ok = c.accept_token_terminal(id);
    }
    if (ok) bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  }
  return bits;
}

std::vector<std::shared_ptr<const Grammar>> test_grammars(int32_t first_special) {
  const nlohmann::ordered_json person = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}, "kind": {"enum": ["child", "adult"]},
      "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]})");
  const std::string s = std::to_string(first_special);
  const std::string tool = "root ::= \"<\" <[" + s + "]> ( \"sum \" a-root | <[" + std::to_string(first_special + 1) +
                           "]> ) \">\"\n" + sluice::guide::json_any_object_gbnf("a-");
  return {
      std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar()),
      std::make_shared<const Grammar>(sluice::guide::json_schema_grammar(person)),
      std::make_shared<const Grammar>(sluice::guide::parse_gbnf(tool)),
  };
}

// States of g reached by random prefixes of its sentences (cut anywhere, also inside a code
// point); the tool grammar, whose token terminals the sampler does not take, is walked by hand.
std::vector<Matcher> random_states(const std::shared_ptr<const Grammar>& g, int count, uint64_t seed, int32_t special,
                                   bool tool) {
  std::mt19937_64 rng(seed);
  std::vector<Matcher> states;
  if (tool) {
    // Token terminals are not sampled; walk the tool grammar by hand.
    for (int i = 0; i < count; ++i) {
      Matcher m(g);
      states.push_back(m);
      EXPECT_TRUE(m.accept_byte('<'));
      states.push_back(m);
      EXPECT_TRUE(m.accept_token_terminal(special));
      states.push_back(m);
      const std::string args = "sum {\"a\": [1, \"\xC3\xA9\"], \"b\": {}}";
      const size_t cut = rng() % (args.size() + 1);
      EXPECT_TRUE(m.accept_bytes(args.substr(0, cut)));
      states.push_back(m);
    }
    return states;
  }
  sluice::guide::testing::Sampler sampler(*g, seed);
  for (int i = 0; i < count; ++i) {
    const std::string s = sampler.sentence(60);
    const size_t cut = rng() % (s.size() + 1);
    Matcher m(g);
    EXPECT_TRUE(m.accept_bytes(s.substr(0, cut)));
    states.push_back(m);
  }
  return states;
}

TEST(GuideMask, MasksEqualBruteForceOnRandomVocabulariesAndStates) {
  const TestVocab v = random_vocab(3000, 7);
  const int32_t first_special = v.vocab->size() - 8;
  MaskCache shared;
  std::vector<uint64_t> bits, fresh;
  int states = 0, nonempty = 0;
  const auto grammars = test_grammars(first_special);
  for (size_t k = 0; k < grammars.size(); ++k) {
    for (const Matcher& m : random_states(grammars[k], 40, 11 + k, first_special, k == 2)) {
      v.vocab->allowed(m, bits, shared);
      v.vocab->allowed(m, fresh);
      const std::vector<uint64_t> want = brute_force(*v.vocab, m);
      ASSERT_EQ(bits, want) << "state " << states;
      ASSERT_EQ(fresh, want) << "state " << states;
      for (int32_t id : {0, 34, 300, first_special, first_special + 1, v.vocab->size() - 1})
        EXPECT_EQ(v.vocab->allows(m, id), ((want[size_t(id) >> 6] >> (id & 63)) & 1) != 0) << id;
      ++states;
      for (uint64_t w : want) nonempty += w != 0;
    }
  }
  EXPECT_GT(states, 100);
  EXPECT_GT(nonempty, 100);
}

TEST(GuideMask, SpecialAndEmptyTokensNeverMatchByBytes) {
  const std::vector<std::string_view> text = {"a", "", "a", "ab", "b"};
  const std::vector<bool> special = {false, false, true, false, true};
  const Vocabulary vocab(text, special);
  auto g = std::make_shared<const Grammar>(sluice::guide::parse_gbnf("root ::= \"a\" \"b\"? | <[4]> \"a\"\n"));
  Matcher m(g);
  std::vector<uint64_t> bits;
  vocab.allowed(m, bits);
  EXPECT_EQ(bits, std::vector<uint64_t>{0b11001});  // "a", "ab", and special 4 by its terminal
  EXPECT_FALSE(vocab.accept(m, 2));                 // special "a": not by bytes
  ASSERT_TRUE(vocab.accept(m, 4));
  vocab.allowed(m, bits);
  EXPECT_EQ(bits, std::vector<uint64_t>{0b00001});
  ASSERT_TRUE(vocab.accept(m, 0));
  EXPECT_TRUE(m.finished());
  vocab.allowed(m, bits);
  EXPECT_EQ(bits, std::vector<uint64_t>{0});
  EXPECT_NE(sluice::testing::expect_error_of([&] { vocab.accept(m, 9); }).find("token id 9"), std::string::npos);
}

TEST(GuideMask, TokenThatIsBothBytesAndTerminalTakesBothPaths) {
  const std::vector<std::string_view> text = {"x", "y"};
  const Vocabulary vocab(text, {false, false});
  // Token 0 may be read as the byte "x" (then "y") or as the terminal <[0]> (then "x").
  auto g = std::make_shared<const Grammar>(sluice::guide::parse_gbnf("root ::= \"x\" \"y\" | <[0]> \"x\"\n"));
  Matcher m(g);
  ASSERT_TRUE(vocab.accept(m, 0));
  EXPECT_TRUE(vocab.allows(m, 0));
  EXPECT_TRUE(vocab.allows(m, 1));
}

TEST(GuideMask, MaskDrivenGenerationEndsInValidJson) {
  const TestVocab v = random_vocab(3000, 99);
  auto g = std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar());
  std::mt19937_64 rng(5);
  MaskCache cache;
  std::vector<uint64_t> bits;
  int ended = 0;
  for (int run = 0; run < 30; ++run) {
    Matcher m(g);
    std::string text;
    for (int step = 0; step < 400 && !m.finished(); ++step) {
      v.vocab->allowed(m, bits, cache);
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < v.vocab->size(); ++id)
        if ((bits[size_t(id) >> 6] >> (id & 63)) & 1) ids.push_back(id);
      ASSERT_FALSE(ids.empty()) << "a live state with no allowed token: " << text;
      // Past 200 steps prefer closing brackets, so most runs end.
      int32_t pick = ids[rng() % ids.size()];
      if (step > 200)
        for (int32_t id : ids)
          if (v.text[id] == "}" || v.text[id] == "]" || v.text[id] == "\"") pick = id;
      ASSERT_TRUE(v.vocab->accept(m, pick));
      text += v.text[pick];
    }
    if (!m.finished()) continue;
    ++ended;
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << "not JSON: " << text;
    EXPECT_TRUE(doc.is_object()) << text;
  }
  EXPECT_GT(ended, 10);
}

TEST(GuideMask, MemoizedMasksEqualFreshWalksThroughHitsAndEvictions) {
  const TestVocab v = random_vocab(3000, 21);
  std::vector<uint64_t> bits, fresh;
  // Unbounded strings return to one state token after token: a mask-driven walk hits the memo.
  {
    const auto any = std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar());
    std::mt19937_64 rng(3);
    MaskCache cache;
    for (int run = 0; run < 4; ++run) {
      Matcher m(any);
      for (int step = 0; step < 300 && !m.finished(); ++step) {
        v.vocab->allowed(m, bits, cache);
        v.vocab->allowed(m, fresh);
        ASSERT_EQ(bits, fresh) << "step " << step << " after " << cache.memo_hits() << " hits";
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < v.vocab->size(); ++id)
          if ((bits[size_t(id) >> 6] >> (id & 63)) & 1) ids.push_back(id);
        ASSERT_FALSE(ids.empty());
        int32_t pick = ids[rng() % ids.size()];  // mostly plain letters, so strings grow long
        for (int32_t id : ids)
          if (rng() % 4 != 0 && (v.text[id] == "a" || v.text[id] == "name" || v.text[id] == "x")) pick = id;
        ASSERT_TRUE(v.vocab->accept(m, pick));
      }
    }
    EXPECT_GT(cache.memo_hits(), 100u);
  }
  // A bounded string counts its characters, so each length is a state of its own: 300 of them
  // overflow the memo's 256 slots. Forward twice (every mask a walk, each evicting the oldest),
  // then backward (the newest 256 answered from the memo).
  const auto bounded = std::make_shared<const Grammar>(sluice::guide::json_schema_grammar(
      nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"note": {"type": "string", "maxLength": 400}},
                                        "required": ["note"], "additionalProperties": false})")));
  std::vector<Matcher> states;
  for (int k = 0; k < 300; ++k) {
    Matcher m(bounded);
    ASSERT_TRUE(m.accept_bytes("{\"note\": \"" + std::string(size_t(k), 'a')));
    states.push_back(m);
  }
  MaskCache cache;
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (int k = 0; k < 300; ++k) order.push_back(k);
  for (int k = 299; k >= 0; --k) order.push_back(k);
  for (int k : order) {
    v.vocab->allowed(states[size_t(k)], bits, cache);
    v.vocab->allowed(states[size_t(k)], fresh);
    ASSERT_EQ(bits, fresh) << "length " << k << " after " << cache.walks() << " walks, " << cache.memo_hits() << " hits";
  }
  EXPECT_EQ(cache.walks(), 600u + 300u - 256u);
  EXPECT_EQ(cache.memo_hits(), 256u);
}

// One cache handed two vocabularies of the same size in turn: the transitions are the grammar's
// and stay, the memoized masks are the vocabulary's and must not answer for the other one.
TEST(GuideMask, OneCacheOverTwoVocabulariesGivesEachItsOwnMasks) {
  const TestVocab a = random_vocab(3000, 31), b = random_vocab(3000, 32);
  ASSERT_EQ(a.vocab->size(), b.vocab->size());
  auto g = std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar());
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("{\"note\": \"ab"));
  const std::vector<uint64_t> want_a = brute_force(*a.vocab, m), want_b = brute_force(*b.vocab, m);
  ASSERT_NE(want_a, want_b);
  MaskCache cache;
  std::vector<uint64_t> bits;
  for (int round = 0; round < 2; ++round) {
    a.vocab->allowed(m, bits, cache);
    EXPECT_EQ(bits, want_a) << "round " << round;
    b.vocab->allowed(m, bits, cache);
    EXPECT_EQ(bits, want_b) << "round " << round;
  }
}

// Every state masked twice (a walk, then the memo) by 1-4 and 7 shares on as many threads equals
// the brute-force mask. (Also in the TSan build: the helpers share the vocabulary and the matcher,
// read only, and write only their own share's bits and cache.)
TEST(ParallelMasks, EqualOneWalkForEveryShareCount) {
  const TestVocab v = random_vocab(3000, 8);
  const int32_t first_special = v.vocab->size() - 8;
  const auto grammars = test_grammars(first_special);
  std::vector<std::vector<Matcher>> states;
  std::vector<std::vector<std::vector<uint64_t>>> want;
  for (size_t k = 0; k < grammars.size(); ++k) {
    states.push_back(random_states(grammars[k], 12, 40 + k, first_special, k == 2));
    want.emplace_back();
    for (const Matcher& m : states.back()) want.back().push_back(brute_force(*v.vocab, m));
  }
  std::shared_ptr<const Vocabulary> shared(v.vocab.get(), [](const Vocabulary*) {});
  std::vector<uint64_t> bits;
  for (int parts : {1, 2, 3, 4, 7}) {
    // Every walk shared, however narrow; the first round's chunks walked by whoever takes them
    // first (mostly the caller on this small trie), the next's by the helpers alone (at once
    // from three shares up), with fresh caches and no memo.
    for (int round = 0; round < 2; ++round) {
      sluice::guide::ParallelMasks masks(shared, parts, 0);
      EXPECT_EQ(masks.parts(), parts);
      masks.leave_chunks_to_helpers(round == 1 && parts > 1);
      for (int again = 0; again < 2; ++again)
        for (size_t k = 0; k < states.size(); ++k)
          for (size_t i = 0; i < states[k].size(); ++i) {
            masks.allowed(states[k][i], bits);
            ASSERT_EQ(bits, want[k][i]) << parts << " shares, grammar " << k << ", state " << i << ", round " << round;
          }
      EXPECT_GT(masks.cache().memo_hits(), 0u);
      EXPECT_EQ(masks.shared_walks() > 0, parts > 1);
      if (round == 1) {
        EXPECT_EQ(masks.helped_walks(), masks.shared_walks());
      }
    }
  }
  EXPECT_NE(sluice::testing::expect_error_of([&] { sluice::guide::ParallelMasks(shared, 0); }).find("0 shares"),
            std::string::npos);
}

// Only a walk whose start state lets through first bytes heading at least min_shared_nodes trie
// nodes wakes the helpers: before a string's opening quote only '"' can come (a few percent of the
// trie's nodes), inside it any byte but '"' (nearly all). Both give allowed()'s masks.
TEST(ParallelMasks, OnlyWideWalksAreShared) {
  const TestVocab v = random_vocab(3000, 9);
  std::shared_ptr<const Vocabulary> shared(v.vocab.get(), [](const Vocabulary*) {});
  auto g = std::make_shared<const Grammar>(sluice::guide::parse_gbnf(R"(root ::= "\"" [^"]* "\"")"));
  Matcher narrow(g), wide(g);
  ASSERT_TRUE(wide.accept_bytes("\""));
  sluice::guide::ParallelMasks masks(shared, 3, v.vocab->nodes() / 2);
  std::vector<uint64_t> bits;
  masks.allowed(narrow, bits);
  EXPECT_EQ(bits, brute_force(*v.vocab, narrow));
  EXPECT_EQ(masks.shared_walks(), 0u);
  masks.allowed(wide, bits);
  EXPECT_EQ(bits, brute_force(*v.vocab, wide));
  EXPECT_EQ(masks.shared_walks(), 1u);
  masks.allowed(wide, bits);  // memoized: no walk
  EXPECT_EQ(masks.shared_walks(), 1u);
  ASSERT_TRUE(wide.accept_bytes("ab"));  // the same recognizer state: memoized too
  masks.allowed(wide, bits);
  EXPECT_EQ(masks.shared_walks(), 1u);
  // A threshold above the whole trie shares nothing.
  sluice::guide::ParallelMasks alone(shared, 3, v.vocab->nodes() + 1);
  alone.allowed(wide, bits);
  EXPECT_EQ(bits, brute_force(*v.vocab, wide));
  EXPECT_EQ(alone.shared_walks(), 0u);
}

}  // namespace
