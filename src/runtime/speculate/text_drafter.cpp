// Cross-tokenizer drafting through text, with bounded work per step however long the history:
// both tokenizers re-encode only text after a forced piece start (tokenizer/pieces.h), where
// encoding splits exactly: encode(a + b) == encode(a) ++ encode(b).
//
// Draft side: the history's text is frozen, in draft ids, up to the last forced piece start (of
// the draft's tokenizer) at a target token boundary, and only the text after it is re-encoded
// each step. Added/special target tokens are hard boundaries: each text run between them is
// encoded on its own (as the chat renderers encode them), and a special becomes the draft's
// token of the same spelling, or that spelling as text when the draft has none.
//
// Target side: the window starts at the latest forced piece start (of the target's tokenizer)
// after the last special, or right after that special. Since pieces never cross it, encoding
// history text + continuation gives the ids before the window followed by encode(window text +
// continuation); so checking that the latter starts with the history's ids in the window and
// proposing what follows is exactly "the re-encoding of everything extends the history", judged
// from the window on (ids before it are the target's own, committed, whatever they are).
#include "runtime/speculate/text_drafter.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/sampling.h"
#include "tokenizer/pieces.h"

namespace sluice::runtime {
namespace {

constexpr size_t kFeedChunk = 256;  // draft context rows per forward pass

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Softmax probability of entry `at` of logits[0..n).
double probability(const float* logits, int64_t n, int32_t at) {
  float top = logits[0];
  for (int64_t i = 1; i < n; ++i) top = std::max(top, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - top);
  return std::exp(double(logits[at]) - top) / sum;
}

}  // namespace

TextDrafter::TextDrafter(std::unique_ptr<DraftLm> draft, std::unique_ptr<tokenizer::Tokenizer> draft_tokenizer,
                         const tokenizer::Tokenizer& target, const TextDrafterOptions& options)
    : draft_(std::move(draft)), draft_tok_(std::move(draft_tokenizer)), target_(target), o_(options) {
  if (!draft_ || !draft_tok_) fail("text drafter: needs a draft model and its tokenizer");
  if (draft_tok_->vocab_size() > draft_->vocab_size())
    fail("text drafter: the draft tokenizer has ", draft_tok_->vocab_size(), " ids but the draft model only ",
         draft_->vocab_size());
  if (!(o_.min_prob >= 0 && o_.min_prob <= 1)) fail("text drafter: min_prob ", o_.min_prob, " is outside 0..1");
  logits_.resize(static_cast<size_t>(draft_->vocab_size()));
}

void TextDrafter::encode_text_for_draft(std::span<const int32_t> history, size_t from, size_t to,
                                        std::vector<int32_t>& out) {
  text_.clear();
  for (size_t i = from; i < to; ++i) text_ += target_.token_bytes(history[i]);
  draft_tok_->encode_into(text_, out);
  counters_.draft_reencoded_bytes += int64_t(text_.size());
}

void TextDrafter::encode_special_for_draft(int32_t target_special, std::vector<int32_t>& out) {
  if (target_special < 0 || target_special >= target_.vocab_size()) return;  // an id with no text
  const std::string_view spelling = target_.token_bytes(target_special);
  if (auto id = draft_tok_->special_id(spelling)) out.push_back(*id);
  else draft_tok_->encode_into(spelling, out);
}

void TextDrafter::freeze(std::span<const int32_t> history, size_t end, std::vector<int32_t> draft_ids) {
  frozen_target_.insert(frozen_target_.end(), history.begin() + long(frozen_target_.size()), history.begin() + long(end));
  frozen_draft_.insert(frozen_draft_.end(), draft_ids.begin(), draft_ids.end());
  marks_.emplace_back(frozen_target_.size(), frozen_draft_.size());
}

void TextDrafter::sync_frozen(std::span<const int32_t> history) {
  // Roll back to the last freeze the history still agrees with (a new request may share only
  // part of the previous one's history).
  const size_t agree = common_prefix(frozen_target_, history);
  if (agree < frozen_target_.size()) {
    while (!marks_.empty() && marks_.back().first > agree) marks_.pop_back();
    frozen_target_.resize(marks_.empty() ? 0 : marks_.back().first);
    frozen_draft_.resize(marks_.empty() ? 0 : marks_.back().second);
  }
  const size_t n = history.size();
  while (frozen_target_.size() < n) {
    const size_t from = frozen_target_.size();
    size_t special = from;
    while (special < n && !boundary(history[special])) ++special;
    if (special < n) {  // a closed run and the special that ends it
      std::vector<int32_t> ids;
      encode_text_for_draft(history, from, special, ids);
      encode_special_for_draft(history[special], ids);
      freeze(history, special + 1, std::move(ids));
      continue;
    }
    // The open run [from, n): freeze it up to its last forced piece start at a token boundary.
    std::string run;
    std::vector<size_t> offsets;
    for (size_t i = from; i < n; ++i) {
      offsets.push_back(run.size());
      run += target_.token_bytes(history[i]);
    }
    size_t cut = 0;
    for (size_t k = offsets.size(); k-- > 1;)
      if (tokenizer::forced_piece_start(run, offsets[k])) {
        cut = k;
        break;
      }
    // With no such start in a very long run, cut before the last token anyway: the draft's ids
    // may then differ from a whole encoding at the cut, which costs draft quality, not output.
    if (cut == 0 && run.size() > o_.max_window_bytes) cut = offsets.size() - 1;
    if (cut == 0) break;
    std::vector<int32_t> ids;
    draft_tok_->encode_into(std::string_view(run).substr(0, offsets[cut]), ids);
    counters_.draft_reencoded_bytes += int64_t(offsets[cut]);
    freeze(history, from + cut, std::move(ids));
    break;
  }
}

void TextDrafter::sync_draft(const std::vector<int32_t>& context) {
  // The draft's cache holds fed_ = context[fed_start_, ...) (fed_start_ > 0 after a long pause,
  // see TextDrafterOptions::pause_window). Keep its longest common prefix with the context; always run at least the
  // last id, whose logits start the continuation.
  const std::span<const int32_t> all(context);
  if (fed_start_ >= all.size() || (fed_start_ > 0 && common_prefix(fed_, all.subspan(fed_start_)) == 0)) {
    fed_start_ = 0;  // the history moved under the window: start over
    fed_.clear();
    draft_->truncate(0);
    logits_current_ = false;
  }
  const std::span<const int32_t> ctx = all.subspan(fed_start_);
  size_t common = common_prefix(fed_, ctx);
  if (common == ctx.size() && fed_.size() == ctx.size() && logits_current_) return;
  if (o_.pause_window > 0 && !fed_.empty() && ctx.size() - common > o_.pause_window) {
    // Drafting was off for a while: restart from the recent window instead of feeding the pause.
    fed_start_ = all.size() - o_.pause_window;
    ++counters_.window_restarts;
    common = 0;
  }
  const std::span<const int32_t> win = all.subspan(fed_start_);
  size_t keep = std::min(common, win.size() - 1);
  draft_->truncate(int64_t(keep));
  fed_.resize(keep);
  for (size_t at = keep; at < win.size(); at += kFeedChunk) {
    auto chunk = win.subspan(at, std::min(kFeedChunk, win.size() - at));
    draft_->forward(chunk, logits_.data());
    fed_.insert(fed_.end(), chunk.begin(), chunk.end());
  }
  logits_current_ = true;
}

std::vector<int32_t> TextDrafter::generate(int budget, bool* ended) {
  *ended = false;
  std::vector<int32_t> out;
  const int64_t V = draft_->vocab_size();
  for (int i = 0; i < budget; ++i) {
    const int32_t next = argmax(logits_.data(), V);
    // The draft's end of text, its specials and ids its tokenizer lacks end the continuation.
    bool text_token = !draft_->is_eos(next) && next < draft_tok_->vocab_size() && !draft_tok_->is_special(next);
    if (text_token) {
      try {
        draft_tok_->token_bytes(next);
      } catch (const Error&) {
        text_token = false;
      }
    }
    if (!text_token) {
      *ended = true;
      break;
    }
    if (i >= 2 && probability(logits_.data(), V, next) < o_.min_prob) break;
    out.push_back(next);
    if (i + 1 < budget) {
      draft_->forward(std::span<const int32_t>(&next, 1), logits_.data());
      fed_.push_back(next);
    }
  }
  counters_.draft_tokens += int64_t(out.size());
  return out;
}

bool TextDrafter::boundary(int32_t id) const {
  return id < 0 || id >= target_.vocab_size() || target_.is_special(id);
}

std::optional<size_t> TextDrafter::window_start(std::span<const int32_t> history) const {
  // Walking back from the end: a forced piece start (the rules look one byte before and four
  // after it), the token after a special, or the start of the history.
  const size_t n = history.size();
  size_t bytes = 0;
  std::string local;
  for (size_t j = n; j-- > 0;) {
    if (boundary(history[j])) return j + 1;
    bytes += target_.token_bytes(history[j]).size();
    if (bytes > o_.max_window_bytes) return std::nullopt;
    if (j == 0) return 0;
    local.clear();
    if (!boundary(history[j - 1])) local.push_back(target_.token_bytes(history[j - 1]).back());
    const size_t pos = local.size();
    for (size_t k = j; k < n && local.size() < pos + 5; ++k) local += target_.token_bytes(history[k]);
    if (tokenizer::forced_piece_start(local, pos)) return j;
  }
  return 0;
}

std::vector<int32_t> TextDrafter::to_target(std::span<const int32_t> history, size_t start,
                                            const std::string& continuation, bool ended, int max_tokens) {
  std::string text;
  for (size_t i = start; i < history.size(); ++i) text += target_.token_bytes(history[i]);
  const size_t window_bytes = text.size();
  text += continuation;
  if (!ended) {
    // The draft would go on: more text could still change the tokens of the last piece (" hel"
    // before "lo", or a different split of a long word), so keep only the text before the
    // continuation's last forced piece start, whose tokens no further text can change.
    size_t cut = 0;
    for (size_t q = text.size(); q-- > window_bytes + 1;)
      if (tokenizer::forced_piece_start(text, q)) {
        cut = q;
        break;
      }
    if (cut == 0) return {};
    text.resize(cut);
  }
  std::vector<int32_t> ids = target_.encode(text);
  counters_.target_reencoded_bytes += int64_t(text.size());
  const auto window = history.subspan(start);
  if (ids.size() < window.size() || !std::equal(window.begin(), window.end(), ids.begin())) {
    ++counters_.mismatched;
    return {};
  }
  std::vector<int32_t> out(ids.begin() + long(window.size()), ids.end());
  if (out.size() > size_t(max_tokens)) out.resize(size_t(max_tokens));
  return out;
}

std::vector<int32_t> TextDrafter::draft_context(std::span<const int32_t> history) {
  sync_frozen(history);
  std::vector<int32_t> context = frozen_draft_;
  encode_text_for_draft(history, frozen_target_.size(), history.size(), context);
  return context;
}

void TextDrafter::catch_up(std::span<const int32_t> history) {
  std::vector<int32_t> context = draft_context(history);
  if (!context.empty()) sync_draft(context);
}

std::vector<int32_t> TextDrafter::propose(std::span<const int32_t> history, int max_tokens) {
  if (max_tokens <= 0 || history.empty()) return {};
  ++counters_.steps;
  context_size_ = 0;
  context_ = draft_context(history);
  if (context_.empty()) return {};
  sync_draft(context_);
  context_size_ = context_.size();
  const std::optional<size_t> start = window_start(history);
  if (!start) return {};
  const int budget = std::clamp(max_tokens + o_.extra_tokens, 3, std::max(3, o_.max_draft_tokens));
  bool ended = false;
  std::vector<int32_t> generated = generate(budget, &ended);
  if (generated.empty()) return {};
  std::vector<int32_t> out = to_target(history, *start, draft_tok_->decode(generated), ended, max_tokens);
  counters_.proposed += int64_t(out.size());
  return out;
}

}  // namespace sluice::runtime
