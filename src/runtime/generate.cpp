// Prefill, decode and draft verification with exact acceptance rules.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace sluice::runtime {
namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); }

// The loop itself; fills r as it goes, so that a cancellation (model::Cancelled, thrown between
// chunks, steps or layers) leaves in r what was generated before it.
void run_generation(model::Target& m, model::State& state, std::span<const int32_t> prompt,
                    const GenerateOptions& opt, const std::function<void(int32_t)>& on_token,
                    const std::function<void(const StepInfo&)>& on_step, GenerateResult& r) {
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  if (opt.prefill_chunk < 0) fail("prefill chunk must not be negative");
  // Each pass reads every routed expert of its union once, so fewer, longer passes read less:
  // the chunk is as long as the memory budget allows, not a small constant.
  const int64_t chunk = opt.prefill_chunk > 0
                            ? opt.prefill_chunk
                            : std::max<int64_t>(1, int64_t(opt.prefill_memory / double(m.pass_bytes_per_row(false))));
  const int64_t V = m.info().vocab_size;
  Sampler sampler(opt.sampling);
  DraftController controller(opt.controller);
  r.stop_reason = "max_new";
  auto cancelled = [&] { return opt.cancel && opt.cancel->load(std::memory_order_relaxed); };

  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<float> probs;
  // A drafter that reads target hidden rows (DSpark) gets those of committed positions only:
  // every pass captures them, and after a verify pass only the accepted prefix is handed over.
  const std::vector<int64_t>* hidden_layers = opt.drafter ? opt.drafter->wants_hidden() : nullptr;
  std::vector<float> hidden_rows;
  model::HiddenCapture capture;
  // Prefill passes (long) stop between layers when cancelled; decode and verify passes (one step)
  // finish, and the loop stops before the next step, so the state stays whole and reusable.
  auto with_capture = [&](model::PassOptions po, size_t rows, bool prefill = false) {
    po.cancel = prefill ? opt.cancel : nullptr;
    if (!hidden_layers) return po;
    hidden_rows.resize(rows * hidden_layers->size() * size_t(m.info().hidden_size));
    capture = {*hidden_layers, hidden_rows.data()};
    po.capture = &capture;
    return po;
  };
  auto hand_over = [&](int64_t first, int64_t n) {
    if (hidden_layers) opt.drafter->on_committed_rows(hidden_rows.data(), n, first);
  };
  auto t0 = clock::now();
  const int64_t total = int64_t(prompt.size());
  if (opt.on_prefill) opt.on_prefill(0, total);
  if (opt.snapshot_every < 0) fail("snapshot interval must not be negative");
  const int64_t every = opt.on_snapshot ? opt.snapshot_every : 0;
  for (size_t at = 0; at < prompt.size();) {
    if (cancelled()) throw model::Cancelled();
    const int64_t first = state.length();
    size_t n = std::min(prompt.size() - at, size_t(chunk));
    if (every > 0) n = std::min(n, size_t((first / every + 1) * every - first));  // end at the next multiple
    const int64_t split = opt.on_snapshot ? opt.snapshot_at : 0;
    if (split > first && split < first + int64_t(n)) n = size_t(split - first);
    m.forward(state, prompt.subspan(at, n), with_capture({}, n, /*prefill=*/true), logits.data());
    hand_over(first, int64_t(n));
    at += n;
    if (opt.on_prefill) opt.on_prefill(int64_t(at), total);
    if (opt.on_snapshot && (at == prompt.size() || every == 0 || state.length() % every == 0 || state.length() == split))
      opt.on_snapshot(state.length());
  }
  // Under a constraint the row's refused tokens count as -inf: the masked copy is what greedy and
  // sampling see. Greedy first tries the unmasked argmax, which is the masked one whenever the
  // constraint allows it (one token checked instead of the whole vocabulary).
  TokenConstraint* const guide = opt.constraint;
  std::vector<uint64_t> allowed_bits(guide ? size_t((V + 63) / 64) : 0);
  std::vector<float> masked(guide && !opt.sampling.greedy() ? size_t(V) : 0);
  auto constrain = [&](const float* row) -> const float* {
    guide->allowed(allowed_bits);
    float* out = masked.data();
    for (int64_t t = 0; t < V; ++t) out[t] = bit(allowed_bits, t) ? row[t] : -INFINITY;
    return out;
  };
  auto masked_argmax = [&](const float* row) {
    const int32_t t = argmax(row, V);
    if (guide->allows(t)) return t;
    guide->allowed(allowed_bits);
    int64_t best = -1;
    for (int64_t i = 0; i < V; ++i)
      if (bit(allowed_bits, i) && (best < 0 || row[i] > row[best])) best = i;
    if (best < 0) fail("guided decoding: the constraint allows no token here");
    return int32_t(best);
  };
  // The row the sampler sees: the logits, or under a constraint their masked copy.
  auto sampled_row = [&](const float* row) { return guide ? constrain(row) : row; };
  auto choose = [&](const float* row) {
    if (opt.sampling.greedy()) return guide ? masked_argmax(row) : argmax(row, V);
    sampler.distribution(sampled_row(row), V, probs);
    return sampler.draw(probs);
  };
  r.prefill_ms = ms_since(t0);
  if (opt.max_new <= 0) return;
  if (opt.top_logprobs < 0 || opt.top_logprobs > 20) fail("top_logprobs must be in 0..20");

  // Log-probabilities of a token chosen from `row`, under the constraint's mask as it stands
  // before the token (one buffer, reused).
  TokenLogprobs lp;
  lp.top.reserve(size_t(opt.top_logprobs) + 1);
  auto report = [&](int32_t id, const float* row) {
    if (guide) guide->allowed(allowed_bits);
    auto ok = [&](int64_t t) { return !guide || bit(allowed_bits, t); };
    float top = -INFINITY;
    for (int64_t t = 0; t < V; ++t)
      if (ok(t)) top = std::max(top, row[t]);
    double sum = 0;
    for (int64_t t = 0; t < V; ++t)
      if (ok(t)) sum += std::exp(double(row[t]) - double(top));
    const double log_z = double(top) + std::log(sum);
    lp.token = id;
    lp.logprob = float(double(row[id]) - log_z);
    lp.top.clear();
    const size_t k = size_t(opt.top_logprobs);
    for (int64_t t = 0; t < V && k > 0; ++t) {
      if (!ok(t) || (lp.top.size() == k && row[t] <= lp.top.back().second)) continue;
      auto at = std::find_if(lp.top.begin(), lp.top.end(), [&](const auto& e) { return row[t] > e.second; });
      lp.top.insert(at, {int32_t(t), row[t]});
      if (lp.top.size() > k) lp.top.pop_back();
    }
    for (auto& e : lp.top) e.second = float(double(e.second) - log_z);
    opt.on_logprobs(lp);
  };

  // history = prompt + generated; its last token is the pending one (not yet fed to the target).
  // Both are sized for the whole run up front: a step appends without allocating.
  std::vector<int32_t> history;
  history.reserve(prompt.size() + size_t(opt.max_new));
  history.assign(prompt.begin(), prompt.end());
  r.generated.reserve(r.generated.size() + size_t(opt.max_new));
  bool done = false;
  auto emit = [&](int32_t id, const float* row) {
    if (opt.on_logprobs) report(id, row);
    if (guide) guide->accept(id);
    r.generated.push_back(id);
    history.push_back(id);
    if (on_token) on_token(id);
    if (opt.stop_at_eos && m.info().is_eos(id)) {
      r.stop_reason = "eos";
      done = true;
    } else if (int64_t(r.generated.size()) >= opt.max_new) {
      done = true;
    }
  };
  if (opt.on_logits) opt.on_logits(logits.data(), V);
  emit(choose(logits.data()), logits.data());
  if (opt.drafter && !done) opt.drafter->catch_up(history);
  r.prefill_ms = ms_since(t0);
  {
    StepInfo first{{r.generated.back()}, 0, 0, r.prefill_ms, "prefill"};
    if (on_step) on_step(first);
  }

  auto t1 = clock::now();
  std::vector<float> rows_logits;
  std::vector<int32_t> rows;
  store::ExpertProvider* provider = m.expert_provider();
  auto read_totals = [&] { return provider ? provider->read_totals() : store::ExpertProvider::ReadTotals{}; };
  bool asked_last = true;  // the drafter caught up after the prefill
  // One step's report and drafts, reused from step to step (their vectors and strings keep their
  // capacity: a step allocates nothing here).
  StepInfo step;
  std::vector<int32_t> drafts;
  while (!done) {
    if (cancelled()) {
      r.stop_reason = "cancelled";
      r.between_steps = true;
      break;
    }
    auto ts = clock::now();
    const auto reads0 = read_totals();
    const int64_t requests0 = m.counters().expert_requests;
    step.emitted.clear();
    step.decision.clear();
    step.proposed = step.accepted = 0;
    step.ms = 0;
    step.union_experts = step.missed_experts = step.bytes_read = 0;
    int depth = 0;
    if (opt.drafter) {
      depth = opt.fixed_depth >= 0 ? opt.fixed_depth : controller.next_depth();
      step.decision = opt.fixed_depth >= 0 ? "fixed depth" : controller.last_decision();
    }
    // Never draft past max_new: the pending token's successor plus drafts must fit.
    depth = int(std::min<int64_t>(depth, opt.max_new - int64_t(r.generated.size()) - 1));
    drafts.clear();
    double catch_up_ms = 0;
    if (depth > 0) {
      opt.drafter->catch_up(history);
      // Catching up after a pause is one-off work and not charged to the step; when the drafter
      // was asked last step too, catching up is part of what every drafted step costs.
      if (!asked_last) catch_up_ms = ms_since(ts);
      drafts = opt.drafter->propose(history, depth);
    }
    if (drafts.size() > size_t(std::max(depth, 0))) drafts.resize(size_t(std::max(depth, 0)));
    for (int32_t d : drafts)
      if (d < 0 || d >= V) fail("drafter '", opt.drafter->name(), "' proposed token ", d, " outside the vocabulary");
    // Drafts the constraint refuses could never be accepted: they are cut before the pass.
    if (guide && !drafts.empty()) {
      guide->save();
      size_t keep = 0;
      while (keep < drafts.size() && guide->allows(drafts[keep])) guide->accept(drafts[keep++]);
      guide->restore();
      drafts.resize(keep);
    }

    const int32_t pending = history.back();
    const int64_t first = state.length();
    // Sampling needs the whole mask at every step (greedy usually checks one token): it is
    // computed while the pass runs.
    if (guide && !opt.sampling.greedy() && drafts.empty()) guide->prepare();
    if (drafts.empty()) {
      m.forward(state, std::span<const int32_t>(&pending, 1), with_capture({}, 1), logits.data());
      hand_over(first, 1);
      size_t before = r.generated.size();
      if (opt.on_logits) opt.on_logits(logits.data(), V);
      emit(choose(logits.data()), logits.data());
      step.emitted.assign(r.generated.begin() + long(before), r.generated.end());
    } else {
      rows.assign(1, pending);
      rows.insert(rows.end(), drafts.begin(), drafts.end());
      rows_logits.resize(rows.size() * size_t(V));
      m.forward(state, rows, with_capture({.all_logits = true, .record = true}, rows.size()), rows_logits.data());
      // Row i's logits predict the token after rows[i]; draft i+1 is judged by row i.
      size_t accepted = 0;
      int32_t follow = -1;
      // The constraint moves through the drafts as they are judged, then back: emit() moves it
      // through what is kept.
      if (guide) guide->save();
      for (size_t i = 0; i < drafts.size(); ++i) {
        const float* row = rows_logits.data() + i * size_t(V);
        if (opt.sampling.greedy()) {
          int32_t t = guide ? masked_argmax(row) : argmax(row, V);
          if (t != drafts[i]) {
            follow = t;
            break;
          }
        } else {
          // Deterministic proposal: accept with the target's probability of it; on rejection
          // draw from the target with that token removed. This keeps the target distribution.
          sampler.distribution(sampled_row(row), V, probs);
          if (sampler.uniform() >= probs[size_t(drafts[i])]) {
            probs[size_t(drafts[i])] = 0.0f;
            follow = sampler.draw(probs);
            break;
          }
        }
        ++accepted;
        if (guide) guide->accept(drafts[i]);
      }
      if (follow < 0) follow = choose(rows_logits.data() + drafts.size() * size_t(V));  // all accepted: bonus
      if (guide) guide->restore();
      m.commit_prefix(state, int64_t(accepted) + 1);
      hand_over(first, int64_t(accepted) + 1);
      size_t before = r.generated.size();
      // Draft i was judged by row i; the token after them by the row after the last accepted.
      for (size_t i = 0; i < accepted && !done; ++i) emit(drafts[i], rows_logits.data() + i * size_t(V));
      if (!done) emit(follow, rows_logits.data() + accepted * size_t(V));
      step.emitted.assign(r.generated.begin() + long(before), r.generated.end());
      step.proposed = int(drafts.size());
      step.accepted = int(accepted);
      r.proposed += int64_t(drafts.size());
      r.accepted += int64_t(accepted);
    }
    step.ms = ms_since(ts);
    asked_last = depth > 0;
    const auto reads1 = read_totals();
    step.union_experts = uint64_t(m.counters().expert_requests - requests0);
    step.missed_experts = reads1.misses - reads0.misses;
    step.bytes_read = reads1.bytes_read - reads0.bytes_read;
    controller.record(StepCost{.asked = depth,
                               .width = 1 + step.proposed,
                               .proposed = step.proposed,
                               .accepted = step.accepted,
                               .seconds = (step.ms - catch_up_ms) / 1e3,
                               .union_experts = step.union_experts,
                               .missed_experts = step.missed_experts,
                               .expert_bytes = reads1.expert_bytes,
                               .read_bytes_per_second = reads1.bytes_per_second});
    ++r.steps;
    if (on_step) on_step(step);
  }
  r.decode_ms = ms_since(t1);
}

}  // namespace

GenerateResult generate(model::Target& m, model::State& state, std::span<const int32_t> prompt,
                        const GenerateOptions& opt, const std::function<void(int32_t)>& on_token,
                        const std::function<void(const StepInfo&)>& on_step) {
  GenerateResult r;
  try {
    run_generation(m, state, prompt, opt, on_token, on_step, r);
  } catch (const model::Cancelled&) {
    r.stop_reason = "cancelled";
  }
  return r;
}

}  // namespace sluice::runtime
