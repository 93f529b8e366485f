// Engine loading (the target through the registry, resident or streamed experts, trace, drafter,
// state cache), sessions, and the engine's statistics.
#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parse_number.h"
#include "core/regular_file.h"
#include "core/thread_pool.h"
#include "fetch/stream_source.h"
#include "model/registry.h"
#include "runtime/conversation.h"
#include "runtime/grammar_constraint.h"
#include "runtime/speculate/make_drafter.h"
#include "store/heat.h"
#include "store/hybrid_plan.h"
#include "store/manifest.h"

namespace sluice::runtime {

std::string device_help() { return device::device_help(); }

namespace {

// The least a disk part's position must add to what a prompt restores (as the prefix cache's split).
constexpr size_t kMinDiskSplit = 64;

// The device tier's budget in bytes: --gpu-experts-gb as GB, or for "auto" what the device has
// free now (after the resident part) less a reserve for scratch, a fifth of its memory and at least
// 4 GiB (a long prompt's attention scores are the largest scratch). 0 on a device without memory
// of its own, where "auto" means off.
uint64_t tier_budget(const std::string& opt, const device::Device& d) {
  const bool has_memory = d.place() == device::Place::Device;
  if (opt == "auto") {
    if (!has_memory) return 0;
    const device::Device::MemoryInfo m = d.memory();
    const uint64_t reserve = std::max<uint64_t>(uint64_t(4) << 30, m.total / 5);
    return m.free > reserve ? m.free - reserve : 0;
  }
  char* end = nullptr;
  const double gb = std::strtod(opt.c_str(), &end);
  if (opt.empty() || *end || !std::isfinite(gb) || gb < 0)
    fail("--gpu-experts-gb must be auto or a number of GB >= 0 (got '", opt, "')");
  if (gb > 0 && !has_memory)
    fail("--gpu-experts-gb ", opt, ": ", d.name(), " computes experts where they are (in RAM); the device tier is for "
         "a device with memory of its own (--device cuda:N)");
  return gb * 1e9 < 1.8e19 ? uint64_t(gb * 1e9) : UINT64_MAX;
}


// The link and core rates the split of experts is planned from: this machine's calibration for
// experts of this shape on this device (store/hybrid_plan.h), measured now on one of the bank's
// own experts and stored when there is none, so later runs plan the same split. *note says which.
store::HybridRates calibrated_rates(device::Device& gpu, store::StreamingExperts& ram, const store::ExpertBank& bank,
                                    std::string* note) {
  const int layer = bank.moe_layers.front();
  const int32_t first = 0;
  ram.begin(layer, std::span<const int32_t>(&first, 1));
  struct Release {  // the sample's lease, on every way out
    store::StreamingExperts& ram;
    int layer;
    ~Release() { ram.release(layer); }
  } release{ram, layer};
  device::ExpertView sample;
  SLUICE_CHECK(ram.next_ready(&sample) == 0, "hybrid calibration: expert 0 of layer ", layer, " did not arrive");
  const std::string path = store::hybrid_calibration_path();
  const std::string key = store::hybrid_calibration_key(gpu.name(), sample, ThreadPool::global().size());
  store::HybridRates r;
  bool unreadable = false;
  try {
    if (store::read_hybrid_calibration(path, key, &r)) {
      *note = cat("rates of ", path);
      return r;
    }
  } catch (const std::exception& e) {  // a damaged cache file is measured over, as a cache entry is
    std::fprintf(stderr, "sluice: warning: %s\n", e.what());
    unreadable = true;
  }
  std::fprintf(stderr, "sluice: measuring the link to %s and the cores on this model's experts (once per machine)...\n",
               gpu.name().c_str());
  r = store::measure_hybrid_rates(gpu, sample, 8, 0.4);
  std::fprintf(stderr, "sluice: %s", store::hybrid_rates_text(r).c_str());
  try {
    if (unreadable) std::filesystem::remove(path);
    store::write_hybrid_calibration(path, key, r);
    std::fprintf(stderr, "; stored in %s (delete it to measure again)\n", path.c_str());
    *note = cat("measured now, stored in ", path);
  } catch (const std::exception& e) {
    // A cache that cannot be written costs the next run a second of measuring, not this run.
    std::fprintf(stderr, "; not stored (%s): the next run measures again\n", e.what());
    *note = "measured now, not stored";
  }
  return r;
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const EngineOptions& opt) {
  std::unique_ptr<Engine> e(new Engine());
  e->opt_ = opt;
  const std::string manifest = store::manifest_path(opt.model_dir);
  if (opt.experts != "auto" && opt.experts != "stream" && opt.experts != "resident")
    fail("--experts must be auto, stream or resident (got '", opt.experts, "')");
  const bool stream = opt.experts == "stream" || (opt.experts == "auto" && std::filesystem::exists(manifest));
  if (opt.experts == "stream" && !std::filesystem::exists(manifest))
    fail(opt.model_dir, ": no expert manifest (", manifest, "); run `sluice prepare --model ", opt.model_dir,
         " --home PATH` first");
  // A FIFO, device or directory where a config, shard, tokenizer or manifest should be would
  // block or confuse the loaders below: refuse it by name first.
  require_regular_model_files(opt.model_dir);
  e->tokenizer_ = tokenizer::load_tokenizer(opt.model_dir);
  device::Device* device = &device::cpu_device();
  if (opt.device != "cpu") {
    e->own_device_ = device::open_device(opt.device);
    device = e->own_device_.get();
  }
  e->model_ = model::load_target({.dir = opt.model_dir, .device = device, .resident_experts = !stream});
  if (stream) {
    const store::ExpertBank* bank = e->model_->expert_bank();
    if (!bank) fail(opt.model_dir, ": ", e->model_->info().model_type, " has no routed experts to stream");
    const std::string config_text = read_regular_file(opt.model_dir + "/config.json");
    store::Manifest m = store::read_manifest(manifest, *bank, store::model_identity(config_text, bank->layout));
    store::StreamOptions so = opt.stream;
    if (!(opt.cache_gb > 0) || !std::isfinite(opt.cache_gb)) fail("--cache-gb must be a positive number");
    // Budgets past 2^64 bytes saturate (and are then refused against physical memory).
    so.cache_bytes = opt.cache_gb * 1e9 < 1.8e19 ? uint64_t(opt.cache_gb * 1e9) : UINT64_MAX;
    so.heat_file = store::heat_path(opt.model_dir);
    if (!so.source) so.source = fetch::StreamSource::open(opt.model_dir, *bank);
    e->store_ = std::make_unique<store::StreamingExperts>(std::move(m), so);
    e->model_->set_expert_provider(e->store_.get());
    const uint64_t budget = tier_budget(opt.gpu_experts_gb, *device);
    double share = 0;
    if (opt.cpu_experts != "auto") {
      share = parse_decimal(opt.cpu_experts, "--cpu-experts (auto or a share in 0..1)", 0, 1);
      if (share > 0 && !budget)
        fail("--cpu-experts splits the experts between the GPU and the host's cores: it needs --device cuda:N with a "
             "device tier (--gpu-experts-gb auto or > 0)");
    }
    if (budget) {
      // The RAM arena registered with the copy engine first, so misses reach the device at the
      // link's rate (where it refuses, the copies go through pageable memory: the same bytes).
      e->arena_pinned_ = device->pin_host(e->store_->arena_data(), e->store_->arena_bytes());
      e->hybrid_resident_ = std::min(1.0, double(budget) / double(std::max<uint64_t>(1, bank->total_record_bytes())));
      if (opt.cpu_experts == "auto" && e->hybrid_resident_ < 1) {
        e->hybrid_rates_ = calibrated_rates(*device, *e->store_, *bank, &e->hybrid_note_);
        share = store::hybrid_share(e->hybrid_rates_, e->hybrid_resident_);
      }
      e->hybrid_share_ = share;
      e->tier_ = std::make_unique<store::DeviceTier>(*device, *e->store_, budget, int(bank->num_layers),
                                                     int(bank->num_experts), share, opt.stream.prefetch_min_precision);
      e->model_->set_expert_provider(e->tier_.get());
    }
  }
  if (!opt.router_trace.empty()) {
    const store::ExpertBank* bank = e->model_->expert_bank();
    e->recorder_ = std::make_unique<RouteRecorder>(e->model_->expert_provider(), opt.router_trace,
                                                   e->model_->info().num_layers, bank ? bank->num_experts : 0);
    e->model_->set_expert_provider(e->recorder_.get());
  }
  e->drafter_ = make_drafter(opt.draft, *e->model_, opt.model_dir, e->tokenizer_.get());
  if (!opt.state_cache_dir.empty()) {
    if (!(opt.state_cache_gb > 0) || !std::isfinite(opt.state_cache_gb)) fail("--state-cache-gb must be a positive number");
    StateCacheOptions so;
    so.dir = opt.state_cache_dir;
    so.budget_bytes = opt.state_cache_gb * 1e9 < 1.8e19 ? uint64_t(opt.state_cache_gb * 1e9) : UINT64_MAX;
    e->state_cache_ = std::make_unique<StateCache>(so, state_cache_key(opt.model_dir, e->model_->device().name()));
  }
  if (!(opt.prefix_cache_gb >= 0) || !std::isfinite(opt.prefix_cache_gb)) fail("--prefix-cache-gb must not be negative");
  if (opt.prefix_block < -1) fail("--prefix-block must not be negative");
  if (opt.prefix_cache_gb > 0) {
    e->prefix_cache_ = std::make_unique<PrefixCache>(uint64_t(std::min(opt.prefix_cache_gb * 1e9, 1.8e19)));
    e->prefix_block_ = opt.prefix_block >= 0 ? opt.prefix_block : e->store_ ? 0 : 1024;
  }
  return e;
}

Engine::~Engine() {
  drafter_.reset();
  tier_.reset();
  if (arena_pinned_) model_->device().unpin_host(store_->arena_data());
  if (store_) {
    try {
      store_->save_heat();
    } catch (const std::exception&) {
      // Heat is an optimisation; failing to save it must not turn a good run into an error.
    }
  }
}

std::unique_ptr<Session> Engine::new_session(bool reuse_state) { return std::make_unique<Session>(*this, reuse_state); }

std::shared_ptr<const guide::Vocabulary> Engine::guide_vocabulary() {
  std::lock_guard<std::mutex> lock(guide_mutex_);
  if (!guide_vocab_) {
    SLUICE_CHECK(tokenizer_, "guided decoding needs the model's tokenizer (", opt_.model_dir, " has none)");
    guide_vocab_ = runtime::guide_vocabulary(*tokenizer_, info().vocab_size);
  }
  return guide_vocab_;
}

nlohmann::json Engine::stats_json() const {
  const auto& mc = model_->counters();
  nlohmann::json j = {{"passes", mc.passes}, {"rows", mc.rows}, {"expert_requests", mc.expert_requests},
                      {"routed_slots", mc.routed_slots}, {"device", model_->device().name()},
                      {"moe_host_seconds", {{"route", mc.moe_route_s}, {"lease", mc.moe_lease_s},
                                            {"host_experts", mc.moe_host_s}, {"release", mc.moe_release_s}}}};
  if (store_) {
    const auto& s = store_->counters();
    nlohmann::json homes = nlohmann::json::array();
    auto hs = store_->home_stats();
    for (size_t h = 0; h < hs.size(); ++h)
      homes.push_back({{"path", store_->manifest().homes[h].path},
                       {"reads", hs[h].reads},
                       {"bytes", hs[h].bytes},
                       {"errors", hs[h].errors},
                       {"mean_ms", hs[h].mean_ms()},
                       {"p99_ms", hs[h].p99_ms()},
                       {"busy_seconds", hs[h].busy_seconds}});
    j["store"] = {{"requests", s.requests},
                  {"hits", s.hits},
                  {"misses", s.misses},
                  {"hit_rate", s.requests ? double(s.hits) / double(s.requests) : 0.0},
                  {"prefetch_issued", s.prefetch_issued},
                  {"prefetch_used", s.prefetch_used},
                  {"prefetch_cancelled", s.prefetch_cancelled},
                  {"prefetch_further", s.prefetch_further},
                  {"prefetch_further_used", s.prefetch_further_used},
                  {"prefetch_idle", s.prefetch_idle},
                  {"prefetch_wasted_bytes", s.prefetch_wasted * store_->manifest().layout.slot_bytes},
                  {"prefetch_recall", s.actual_total ? double(s.predicted_correct) / double(s.actual_total) : 0.0},
                  {"bytes_read", s.bytes_read},
                  {"fetched", s.fetched},
                  {"missing", store_->missing()},
                  {"cache_slots", store_->slots()},
                  {"drives_idle_seconds", store_->drives_idle_seconds()},
                  {"reader", store_->reader_engine()},
                  {"homes", homes}};
  }
  if (tier_) {
    const store::TierCounters& t = tier_->counters();
    j["gpu_tier"] = {{"slots", t.slots},
                     {"slot_bytes", t.slot_bytes},
                     {"requests", t.requests},
                     {"hits", t.hits},
                     {"hit_rate", t.requests ? double(t.hits) / double(t.requests) : 0.0},
                     {"copies", t.copies},
                     {"bytes_copied", t.bytes_copied},
                     {"evictions", t.evictions},
                     {"passthrough", t.passthrough},
                     {"on_host", t.on_host},
                     {"cpu_share", hybrid_share_},
                     {"cpu_share_from", opt_.cpu_experts == "auto" ? hybrid_note_ : "--cpu-experts"},
                     {"resident_fraction", hybrid_resident_},
                     {"link_bytes_per_s", hybrid_rates_.link},
                     {"cores_bytes_per_s", hybrid_rates_.cores},
                     {"link_shared_bytes_per_s", hybrid_rates_.link_shared},
                     {"cores_shared_bytes_per_s", hybrid_rates_.cores_shared},
                     {"ahead", t.ahead},
                     {"ahead_used", t.ahead_used},
                     {"ahead_wasted", t.ahead_wasted},
                     {"pinned_ram", arena_pinned_}};
  }
  if (prefix_cache_) {
    const PrefixCache::Counters c = prefix_cache_->counters();
    j["prefix_cache"] = {{"budget_bytes", prefix_cache_->budget()}, {"bytes", prefix_cache_->bytes()},
                         {"wholes", prefix_cache_->wholes()},        {"parts", prefix_cache_->parts()},
                         {"block", prefix_block_},                   {"restores", c.restores},
                         {"restored_tokens", c.restored_tokens},     {"whole_loads", c.whole_loads},
                         {"part_loads", c.part_loads},               {"wholes_kept", c.wholes_kept},
                         {"parts_kept", c.parts_kept},               {"evicted", c.evicted},
                         {"too_large", c.too_large},                 {"restore_ms", c.restore_ms},
                         {"keep_ms", c.keep_ms}};
  }
  if (state_cache_) {
    const StateCache::Counters c = state_cache_->counters();
    j["state_cache"] = {{"dir", state_cache_->dir()},         {"entries", state_cache_->entries()},
                        {"bytes", state_cache_->bytes()},     {"restores", c.restores},
                        {"restored_tokens", c.restored_tokens}, {"restore_ms", c.restore_ms},
                        {"part_restores", c.part_restores},   {"parts_saved", c.parts_saved},
                        {"saves", c.saves},                   {"saved_bytes", c.saved_bytes},
                        {"save_ms", c.save_ms},               {"evicted", c.evicted},
                        {"discarded", c.discarded}};
  }
  return j;
}

std::string Engine::stats_text(int64_t generated_tokens) const {
  std::ostringstream o;
  const auto& mc = model_->counters();
  o << "[stats] passes=" << mc.passes << " rows=" << mc.rows << " expert_requests=" << mc.expert_requests
    << " device=" << model_->device().name() << "\n";
  if (mc.expert_requests) {
    char moe[256];
    std::snprintf(moe, sizeof moe, "[moe] host time: route %.3f s, lease %.3f s, host experts %.3f s, release %.3f s\n",
                  mc.moe_route_s, mc.moe_lease_s, mc.moe_host_s, mc.moe_release_s);
    o << moe;
  }
  if (store_) {
    const auto& s = store_->counters();
    char line[512];
    std::snprintf(line, sizeof line,
                  "[store] reader=%s slots=%zu hit_rate=%.3f (%llu/%llu) bytes_read=%.1f MB (%.2f MB/token) "
                  "prefetch issued=%llu used=%llu cancelled=%llu further=%llu (used %llu) idle=%llu wasted=%.1f MB "
                  "recall=%.3f drives idle=%.2f s\n",
                  store_->reader_engine(), store_->slots(), s.requests ? double(s.hits) / double(s.requests) : 0.0,
                  (unsigned long long)s.hits, (unsigned long long)s.requests, s.bytes_read / 1e6,
                  generated_tokens ? s.bytes_read / 1e6 / double(generated_tokens) : 0.0,
                  (unsigned long long)s.prefetch_issued, (unsigned long long)s.prefetch_used,
                  (unsigned long long)s.prefetch_cancelled, (unsigned long long)s.prefetch_further,
                  (unsigned long long)s.prefetch_further_used, (unsigned long long)s.prefetch_idle,
                  double(s.prefetch_wasted * store_->manifest().layout.slot_bytes) / 1e6,
                  s.actual_total ? double(s.predicted_correct) / double(s.actual_total) : 0.0,
                  store_->drives_idle_seconds());
    o << line;
    if (tier_) {
      const store::TierCounters& t = tier_->counters();
      std::snprintf(line, sizeof line,
                    "[gpu tier] slots=%llu (%.2f GB) hit_rate=%.3f (%llu/%llu) copied=%.1f MB (%.2f MB/token) "
                    "evictions=%llu passthrough=%llu on_host=%llu ahead=%llu (used %llu, wasted %llu) ram=%s\n",
                    (unsigned long long)t.slots, double(t.slots * t.slot_bytes) / 1e9,
                    t.requests ? double(t.hits) / double(t.requests) : 0.0, (unsigned long long)t.hits,
                    (unsigned long long)t.requests, t.bytes_copied / 1e6,
                    generated_tokens ? t.bytes_copied / 1e6 / double(generated_tokens) : 0.0,
                    (unsigned long long)t.evictions, (unsigned long long)t.passthrough,
                    (unsigned long long)t.on_host, (unsigned long long)t.ahead, (unsigned long long)t.ahead_used,
                    (unsigned long long)t.ahead_wasted, arena_pinned_ ? "pinned" : "pageable");
      o << line;
      if (hybrid_share_ > 0 || hybrid_rates_.cores > 0) {
        std::snprintf(line, sizeof line,
                      "[hybrid] cpu_share=%.2f of each layer's experts in decode passes (%s) tier holds %.3f of the "
                      "bank; %s\n",
                      hybrid_share_, opt_.cpu_experts == "auto" ? hybrid_note_.c_str() : "--cpu-experts",
                      hybrid_resident_, store::hybrid_rates_text(hybrid_rates_).c_str());
        o << line;
      }
    }
    if (s.fetched || store_->missing()) {
      std::snprintf(line, sizeof line, "[store] fetched from source this run=%llu experts still missing locally=%llu\n",
                    (unsigned long long)s.fetched, (unsigned long long)store_->missing());
      o << line;
    }
    auto hs = store_->home_stats();
    for (size_t h = 0; h < hs.size(); ++h) {
      std::snprintf(line, sizeof line,
                    "[home %zu] %s reads=%llu bytes=%.1f MB errors=%llu mean=%.2f ms p99=%.2f ms busy=%.2f s\n", h,
                    store_->manifest().homes[h].path.c_str(), (unsigned long long)hs[h].reads, hs[h].bytes / 1e6,
                    (unsigned long long)hs[h].errors, hs[h].mean_ms(), hs[h].p99_ms(), hs[h].busy_seconds);
      o << line;
    }
  }
  if (prefix_cache_) {
    const PrefixCache::Counters c = prefix_cache_->counters();
    char line[512];
    std::snprintf(line, sizeof line,
                  "[prefix-cache] %.1f of %.1f MB: %zu whole states, %zu parts (block %lld); restores=%lld (%lld tokens; "
                  "%lld whole, %lld part loads; %.1f ms) kept %lld whole, %lld parts (%.1f ms) evicted=%lld\n",
                  double(prefix_cache_->bytes()) / 1e6, double(prefix_cache_->budget()) / 1e6, prefix_cache_->wholes(),
                  prefix_cache_->parts(), (long long)prefix_block_, (long long)c.restores, (long long)c.restored_tokens,
                  (long long)c.whole_loads, (long long)c.part_loads, c.restore_ms, (long long)c.wholes_kept,
                  (long long)c.parts_kept, c.keep_ms, (long long)c.evicted);
    o << line;
  }
  if (state_cache_) {
    const StateCache::Counters c = state_cache_->counters();
    char line[512];
    std::snprintf(line, sizeof line,
                  "[state-cache] %s entries=%zu bytes=%.1f MB restores=%lld (%lld tokens, %lld over a part, %.1f ms) "
                  "saves=%lld and %lld parts (%.1f MB, %.1f ms) evicted=%lld discarded=%lld\n",
                  state_cache_->dir().c_str(), state_cache_->entries(), double(state_cache_->bytes()) / 1e6,
                  (long long)c.restores, (long long)c.restored_tokens, (long long)c.part_restores, c.restore_ms,
                  (long long)c.saves, (long long)c.parts_saved,
                  double(c.saved_bytes) / 1e6, c.save_ms, (long long)c.evicted, (long long)c.discarded);
    o << line;
  }
  return o.str();
}

Session::Session(Engine& engine, bool reuse_state)
    : engine_(engine), state_(engine.model().new_state()), reuse_(reuse_state) {}

void Session::reset() {
  state_->reset();
  tape_.clear();
}

GenerateResult Session::generate(std::span<const int32_t> prompt, GenerateOptions opt,
                                 const std::function<void(int32_t)>& on_token,
                                 const std::function<void(const StepInfo&)>& on_step) {
  model::Target& m = engine_.model();
  PrefixCache* ram = reuse_ ? engine_.prefix_cache() : nullptr;
  // What the state holds of the prompt: with the prefix cache, the longest prefix it or the state
  // gives; without, the whole tape when the prompt extends it, else the part they share when the
  // state can be cut back. At least one prompt token is always fed.
  size_t keep = 0, split = 0;
  if (ram) {
    keep = ram->restore(m, *state_, tape_, tape_prompt_, prompt, &split);
  } else {
    keep = reuse_ ? reusable_prefix(tape_, prompt) : 0;
    if (reuse_ && keep == 0 && !prompt.empty() && m.can_truncate())
      keep = std::min(common_prefix(tape_, prompt), prompt.size() - 1);
    if (keep == 0) state_->reset();
    else if (int64_t(keep) < state_->length()) m.truncate(*state_, int64_t(keep));
  }
  restored_ = 0;
  StateCache* cache = reuse_ ? engine_.state_cache() : nullptr;
  if (cache && !prompt.empty()) {
    // The state holds prompt[0, keep) now; the disk may give more (then the state is replaced: the
    // prefix cache keeps it first).
    if (ram && keep > 0 && cache->usable(m, prompt) > keep) ram->keep_whole(m, *state_, prompt.first(keep));
    restored_ = cache->restore(m, *state_, prompt, keep);
    if (restored_ > 0) keep = restored_;
    else if (state_->length() != int64_t(keep)) keep = 0;  // a bad entry reset the state
  }
  if (keep == 0) state_->reset();
  reused_ = keep;
  tape_.clear();  // until this generation finishes normally, the state matches no tape
  if (!opt.drafter) opt.drafter = engine_.drafter();
  if ((ram || cache) && !m.can_truncate() && !opt.on_snapshot) {
    // Where this prompt leaves what an earlier one (in RAM or on disk) shared with it: a part kept
    // there (in RAM, and on disk with the state cache) lets the next prompt that shares as much
    // resume from it, also after a restart. Not for a few tokens (a chat template's opening).
    if (cache && !prompt.empty()) {
      const size_t on_disk = cache->shared_prefix(prompt);
      if (on_disk >= keep + kMinDiskSplit) split = std::max(split, on_disk);
    }
    auto tokens = std::make_shared<const std::vector<int32_t>>(prompt.begin(), prompt.end());
    if (ram) opt.snapshot_every = engine_.prefix_block();
    if (split > keep) opt.snapshot_at = int64_t(split);
    opt.on_snapshot = [ram, cache, &m, this, tokens, at = opt.snapshot_at](int64_t length) {
      if (ram) ram->keep_part(m, *state_, tokens);
      if (cache && length == at) cache->save_part(m, *state_, std::span<const int32_t>(*tokens).first(size_t(at)));
    };
  }
  GenerateResult r = runtime::generate(m, *state_, prompt.subspan(reused_), opt, on_token, on_step);
  if (r.stop_reason == "cancelled" &&
      (!r.between_steps || state_->length() != int64_t(prompt.size() + r.generated.size()) - 1)) {
    // A pass stopped between layers: nothing in the state can be trusted or reused. Stopped
    // between steps, the state holds the prompt and the reply but its last token, as after a
    // finished reply, and the next prompt that extends them continues it.
    state_->reset();
    return r;
  }
  if (reuse_) {
    tape_ = tape_after(prompt, r.generated);
    tape_prompt_ = prompt.size();
  }
  if (cache) cache->save(m, *state_, tape_);
  return r;
}

}  // namespace sluice::runtime
