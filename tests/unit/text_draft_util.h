// Helpers for tests of drafting through text: a small draft tokenizer unlike the default
// target's (Qwen's pre-tokenizer, its own merges, one special shared by spelling), a tiny random
// Qwen3 draft directory with it, and a scripted draft LM that continues a known text.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/durable_file.h"
#include "format/safetensors.h"
#include "model/tiny_checkpoint.h"
#include "runtime/speculate/draft_lm.h"
#include "runtime/speculate/text_drafter.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_data.h"

namespace sluice::testing {

inline const std::string kDefaultTarget = std::string(SLUICE_SOURCE_DIR) + "/models/default/target";

inline std::string draft_tokenizer_json() {
  return tokenizer::testing::byte_level_tokenizer_json(
             {" the", " and", " of", " to", " be", " was", " God", " light", " said", "in", "ing", "er", "th", "ou",
              "'s", "ll", "\n\n", ". ", " \xE4\xB8\xAD", "\xC3\xA9"},
             {{"<|end_of_msg|>", true}, {"<|draft_only|>", true}}, tokenizer::testing::kQwenSplitPattern)
      .dump();
}

inline std::unique_ptr<tokenizer::Tokenizer> draft_tokenizer() {
  return tokenizer::load_tokenizer_json_bytes(draft_tokenizer_json(), "draft tokenizer.json");
}

// A random tiny Qwen3 with the draft tokenizer in `dir` (vocab: the tokenizer's and one EOS id).
inline void write_text_draft(const std::string& dir, uint64_t seed = 5) {
  model::TinyQwen3Spec s;
  s.seed = seed;
  s.vocab = draft_tokenizer()->vocab_size() + 1;
  s.eos = int32_t(s.vocab - 1);
  model::write_tiny_qwen3_checkpoint(s, dir);
  write_file_durably(dir + "/tokenizer.json", draft_tokenizer_json());
}

// ScriptedTextLm knows the text from its start only, so drafters driving it always feed the whole
// context (no restart from a recent window after a pause).
inline runtime::TextDrafterOptions scripted_options() {
  runtime::TextDrafterOptions o;
  o.pause_window = 0;
  return o;
}

// A draft LM that knows the text: its context must decode to a prefix of `truth`; it then
// predicts (with certainty) the first draft token of the truth's next stretch, and its EOS at
// each offset in `stops` (where a special's spelling starts) and at the end.
class ScriptedTextLm : public runtime::DraftLm {
 public:
  ScriptedTextLm(std::string truth, std::vector<size_t> stops)
      : tok_(draft_tokenizer()), truth_(std::move(truth)), stops_(std::move(stops)) {}
  int64_t vocab_size() const override { return tok_->vocab_size() + 1; }
  bool is_eos(int32_t id) const override { return id == tok_->vocab_size(); }
  int64_t length() const override { return int64_t(ids_.size()); }
  void truncate(int64_t n) override {
    ASSERT_LE(n, length());
    ids_.resize(size_t(n));
  }
  void forward(std::span<const int32_t> tokens, float* logits) override {
    ids_.insert(ids_.end(), tokens.begin(), tokens.end());
    const std::string text = tok_->decode(ids_);
    EXPECT_EQ(truth_.compare(0, text.size(), text), 0) << "the drafter's context is not the truth's text: " << text;
    std::fill(logits, logits + vocab_size(), -10.0f);
    const size_t pos = text.size();
    auto stop = std::lower_bound(stops_.begin(), stops_.end(), pos);
    const size_t end = stop == stops_.end() ? truth_.size() : *stop;
    int32_t next = tok_->vocab_size();
    if (pos < end) next = tok_->encode(std::string_view(truth_).substr(pos, end - pos))[0];
    logits[next] = 10.0f;
  }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::string truth_;
  std::vector<size_t> stops_;
  std::vector<int32_t> ids_;
};

}  // namespace sluice::testing
