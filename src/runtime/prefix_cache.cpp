// The prefix cache in RAM: choosing the longest usable prefix among the session's own state, whole
// states and recurrent parts; keeping and evicting them.
#include "runtime/prefix_cache.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "model/state_io.h"
#include "runtime/conversation.h"

namespace sluice::runtime {
namespace {

// The least a split must add to what a prompt restores (PrefixCache::restore's `split`).
constexpr size_t kMinSplit = 64;

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// How much of `prompt` a state holding `chain` gives by itself: all of chain when the prompt
// strictly extends it, else (a target that truncates) what they share, at most prompt.size() - 1.
size_t direct_use(std::span<const int32_t> chain, std::span<const int32_t> prompt, bool cut) {
  if (chain.empty()) return 0;
  const size_t common = common_prefix(chain, prompt);
  if (common == chain.size() && common < prompt.size()) return common;
  return cut ? std::min(common, prompt.size() - 1) : 0;
}

}  // namespace

PrefixCache::PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {
  SLUICE_CHECK(budget_ > 0, "the prefix cache needs a positive budget");
}

size_t PrefixCache::best_part(std::span<const int32_t> prompt, size_t limit) const {
  size_t best = parts_.size();
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    if (size_t(p.length) > limit || (best < parts_.size() && p.length <= parts_[best].length)) continue;
    if (std::equal(p.tokens->begin(), p.tokens->begin() + p.length, prompt.begin())) best = i;
  }
  return best;
}

PrefixCache::Whole* PrefixCache::find_whole(std::span<const int32_t> tape) {
  for (Whole& w : wholes_)
    if (std::equal(w.tokens.begin(), w.tokens.end(), tape.begin(), tape.end())) return &w;
  return nullptr;
}

PrefixCache::Plan PrefixCache::plan_for(std::span<const int32_t> tape, std::span<const int32_t> prompt,
                                        bool cut) const {
  // Candidates: the session's state (source -1) and each whole state; over the one that shares the
  // most with the prompt, a part no longer than that (its cache rows below the part are right).
  // Ties keep the session's state: nothing to load.
  Plan plan{direct_use(tape, prompt, cut), -1, parts_.size()};
  size_t reach = std::min(common_prefix(tape, prompt), prompt.size() - 1);
  int reach_source = tape.empty() ? -2 : -1;  // -2: none yet
  for (size_t i = 0; i < wholes_.size(); ++i) {
    const Whole& w = wholes_[i];
    const size_t direct = direct_use(w.tokens, prompt, cut);
    if (direct > plan.use) plan = {direct, int(i), parts_.size()};
    const size_t shared = std::min(common_prefix(w.tokens, prompt), prompt.size() - 1);
    if (reach_source == -2 || shared > reach) {
      reach = shared;
      reach_source = int(i);
    }
  }
  if (!cut && reach_source != -2) {
    const size_t p = best_part(prompt, reach);
    if (p < parts_.size() && size_t(parts_[p].length) > plan.use) plan = {size_t(parts_[p].length), reach_source, p};
  }
  return plan;
}

size_t PrefixCache::shared_prefix(std::span<const int32_t> tape, std::span<const int32_t> prompt) const {
  size_t shared = common_prefix(tape, prompt);
  for (const Whole& w : wholes_) shared = std::max(shared, common_prefix(w.tokens, prompt));
  const std::vector<int32_t>* last = nullptr;  // parts of one prompt share its tokens
  for (const Part& p : parts_)
    if (p.tokens.get() != last) {
      last = p.tokens.get();
      shared = std::max(shared, common_prefix(*p.tokens, prompt));
    }
  return prompt.empty() ? 0 : std::min(shared, prompt.size() - 1);
}

size_t PrefixCache::restore(const model::Target& m, model::State& st, std::span<const int32_t> tape,
                            size_t tape_prompt, std::span<const int32_t> prompt, size_t* split) {
  std::lock_guard<std::mutex> lock(mu_);
  if (split) *split = 0;
  if (prompt.empty() || st.length() != int64_t(tape.size())) {
    st.reset();
    return 0;
  }
  const bool cut = m.can_truncate();
  Plan plan = plan_for(tape, prompt, cut);
  // The session's tape is left (a whole state loaded, or the state cut back or under a part)
  // unless the prompt extends all of it: keep it first, then plan again (keeping it may have
  // evicted what the first plan chose). Not when the prompt holds all of the tape's own prompt
  // and leaves only its reply: that is the same conversation's next turn, whose client sent the
  // reply back in its own rendering (reasoning dropped, text re-tokenized); a copy of the whole
  // state would spare a prefill of reply tokens that no request sends.
  if (!tape.empty() && (plan.source >= 0 || plan.use < tape.size()) &&
      common_prefix(tape, prompt) < std::min(tape_prompt, tape.size()) && !find_whole(tape)) {
    keep_whole_locked(m, st, tape);
    plan = plan_for(tape, prompt, cut);
  }
  const size_t use = plan.use, part = plan.part;
  const int source = plan.source;
  // Where this prompt leaves what an earlier one shared with it, past what is restored: a part
  // kept there serves the next prompt that shares as much (a recurrent target's only way to it).
  // Not for a few tokens (a chat template's opening): the extra prefill pass would cost more.
  if (split && !cut) {
    const size_t shared = shared_prefix(tape, prompt);
    if (shared >= use + kMinSplit) *split = shared;
  }
  if (use == 0) {
    st.reset();
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (source >= 0) {
      Whole& w = wholes_[size_t(source)];
      model::BytesSource in(w.bytes);
      m.read_state(st, in);
      w.used = ++clock_;
      ++counters_.whole_loads;
    }
    if (part < parts_.size()) {
      model::BytesSource in(parts_[part].bytes);
      m.read_recurrent(st, in);
      parts_[part].used = ++clock_;
      ++counters_.part_loads;
    } else if (st.length() > int64_t(use)) {
      SLUICE_CHECK(m.truncate(st, int64_t(use)), "prefix cache: a state that cannot be cut back");
    }
    SLUICE_CHECK(st.length() == int64_t(use), "prefix cache: restored a state of length ", st.length(), ", not ", use);
  } catch (...) {
    st.reset();  // an entry that does not fit its target is a bug: nothing is half-restored
    throw;
  }
  ++counters_.restores;
  counters_.restored_tokens += int64_t(use);
  counters_.restore_ms += ms_since(t0);
  return use;
}

void PrefixCache::keep_part(const model::Target& m, const model::State& st, const Tokens& tokens) {
  if (m.can_truncate() || st.length() <= 0 || size_t(st.length()) > tokens->size()) return;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t n = st.length();
  for (Part& p : parts_)
    if (p.length == n && std::equal(p.tokens->begin(), p.tokens->begin() + n, tokens->begin())) {
      p.used = ++clock_;
      return;
    }
  const auto t0 = std::chrono::steady_clock::now();
  model::BytesSink out;
  m.write_recurrent(st, out);
  Part p{tokens, n, std::move(out.bytes), ++clock_};
  if (cost(p) > budget_) {
    ++counters_.too_large;
    return;
  }
  bytes_ += cost(p);
  parts_.push_back(std::move(p));
  ++counters_.parts_kept;
  counters_.keep_ms += ms_since(t0);
  evict();
}

void PrefixCache::keep_whole(const model::Target& m, const model::State& st, std::span<const int32_t> tape) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_whole_locked(m, st, tape);
}

void PrefixCache::keep_whole_locked(const model::Target& m, const model::State& st, std::span<const int32_t> tape) {
  if (tape.empty() || st.length() != int64_t(tape.size())) return;
  if (Whole* same = find_whole(tape)) {
    same->used = ++clock_;
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  model::BytesSink out;
  m.write_state(st, out);
  Whole w{{tape.begin(), tape.end()}, std::move(out.bytes), ++clock_};
  if (cost(w) > budget_) {
    ++counters_.too_large;
    return;
  }
  const bool cut = m.can_truncate();
  // A whole state for tokens the new one extends is redundant when the new one reaches it: by
  // cutting back, or by the part at its length (kept here with it).
  if (!cut) {
    Tokens tokens = std::make_shared<const std::vector<int32_t>>(w.tokens);
    model::BytesSink part;
    m.write_recurrent(st, part);
    Part p{tokens, int64_t(tape.size()), std::move(part.bytes), clock_};
    bytes_ += cost(p);
    parts_.push_back(std::move(p));
    ++counters_.parts_kept;
  }
  for (size_t i = 0; i < wholes_.size();) {
    const Whole& o = wholes_[i];
    const bool prefix = o.tokens.size() < tape.size() && std::equal(o.tokens.begin(), o.tokens.end(), tape.begin());
    const bool reached = prefix && (cut || [&] {
                           const size_t p = best_part(tape, o.tokens.size());
                           return p < parts_.size() && size_t(parts_[p].length) == o.tokens.size();
                         }());
    if (reached) {
      bytes_ -= cost(o);
      wholes_.erase(wholes_.begin() + std::ptrdiff_t(i));
    } else {
      ++i;
    }
  }
  bytes_ += cost(w);
  wholes_.push_back(std::move(w));
  ++counters_.wholes_kept;
  counters_.keep_ms += ms_since(t0);
  evict();
}

void PrefixCache::evict() {
  while (bytes_ > budget_) {
    // The least recently used entry of either kind; the newest stays whatever its size.
    int64_t oldest = clock_;
    bool whole = false;
    size_t at = 0;
    for (size_t i = 0; i < wholes_.size(); ++i)
      if (wholes_[i].used < oldest) oldest = wholes_[i].used, whole = true, at = i;
    for (size_t i = 0; i < parts_.size(); ++i)
      if (parts_[i].used < oldest) oldest = parts_[i].used, whole = false, at = i;
    if (oldest == clock_) return;
    if (whole) {
      bytes_ -= cost(wholes_[at]);
      wholes_.erase(wholes_.begin() + std::ptrdiff_t(at));
    } else {
      bytes_ -= cost(parts_[at]);
      parts_.erase(parts_.begin() + std::ptrdiff_t(at));
    }
    ++counters_.evicted;
  }
}

size_t PrefixCache::wholes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wholes_.size();
}
size_t PrefixCache::parts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parts_.size();
}
uint64_t PrefixCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
PrefixCache::Counters PrefixCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace sluice::runtime
