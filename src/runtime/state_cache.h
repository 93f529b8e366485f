// The prompt/state cache on disk: after a generation the session's exact sequence state is saved
// with the tokens it consumed, one file per token prefix, under a byte budget (least recently used
// entries go first); a later prompt that extends a saved prefix — in this process or after a
// restart — restores that state instead of prefilling it. The longest usable prefix wins; a target
// whose states can be cut back (KV and MLA caches) also uses any shorter prefix of an entry.
//
// A target whose states cannot be cut back (recurrent layers: K3's and Kimi-Linear's KDA) also
// keeps recurrent parts (Target::write_recurrent's bytes, no cache rows) of prompt prefixes: a
// part of p tokens read over a whole entry that holds those p tokens or more gives the state of
// the p tokens (the whole entry's cache rows below p are the part's own). Sessions save one where
// a prompt leaves what a saved entry shared with it, so that a new conversation sharing only a
// system prompt with saved ones resumes after it, also after a restart.
//
// An entry is keyed by the model's identity (config.json, each safetensors shard's header, size
// and first and last bytes, the device and ISA that computed it: states differ in their last bits
// between ISAs) and its tokens. Entries are written to a temporary name, fsynced and renamed into
// place, and checksummed (xxh3 over everything); a truncated, corrupt or foreign entry is deleted
// with one warning line and never restored.
//
// File: "SLUICEST" | version u32 | kind u32 (0 whole state, 1 recurrent part) | model key (16 hex
// chars) | token count u64 | tokens (i32 each) | the target's state bytes (model/state_io.h) or its
// recurrent part's | payload size u64 | xxh3 u64, integers little-endian. Name: <model key>-<xxh3
// of the tokens>.state, or .part for a part.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "model/target.h"

namespace sluice::runtime {

struct StateCacheOptions {
  std::string dir;            // created if missing
  uint64_t budget_bytes = 0;  // entries of this model kept in all (the newest may pass it while written)
  // One line per problem (an entry discarded, a failed write); default: stderr.
  std::function<void(const std::string&)> warn;
};

// The identity of a model's states: 16 hex digits from config.json, the safetensors shards (name,
// size, header, first and last 64 KiB of data) and the device name (its ISA included).
std::string state_cache_key(const std::string& model_dir, const std::string& device_name);

class StateCache {
 public:
  struct Counters {
    int64_t restores = 0, restored_tokens = 0, saves = 0, evicted = 0, discarded = 0;
    int64_t part_restores = 0, parts_saved = 0;  // restores that read a part over a whole entry
    uint64_t saved_bytes = 0;
    double restore_ms = 0, save_ms = 0;
  };

  // Scans dir for this key's entries (their tokens; contents are checked when restored), removes
  // temporary files of writers that no longer run, and evicts down to the budget.
  StateCache(StateCacheOptions opt, std::string model_key);

  // Restores into st the longest saved prefix of `prompt` that is longer than `longer_than` and
  // leaves at least one prompt token to feed (a whole entry, or a part over one); returns its
  // length, or 0 when there is none (st is then untouched, unless an entry failed its checks while
  // being read: st is then reset).
  size_t restore(const model::Target& m, model::State& st, std::span<const int32_t> prompt, size_t longer_than);
  // The prefix restore() would give now (0: none), without reading any entry.
  size_t usable(const model::Target& m, std::span<const int32_t> prompt) const;
  // Saves st, which holds exactly `tape`, unless an entry of the same tokens exists (it becomes the
  // most recent). With a target that truncates, entries whose tokens are a prefix of the tape are
  // removed: the new one stands for them. Failures are warned about, never thrown.
  void save(const model::Target& m, const model::State& st, std::span<const int32_t> tape);
  // For a target that cannot cut back: saves the recurrent part of st, which holds exactly
  // `tokens` (a no-op for other targets).
  void save_part(const model::Target& m, const model::State& st, std::span<const int32_t> tokens);
  // The most any entry's tokens share with the prompt, at most prompt.size() - 1 (where a session
  // keeps a part: GenerateOptions::snapshot_at).
  size_t shared_prefix(std::span<const int32_t> prompt) const;

  size_t entries() const;
  uint64_t bytes() const;
  Counters counters() const;
  const std::string& dir() const { return opt_.dir; }

 private:
  struct Entry {
    std::string file;  // name inside dir
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    int64_t used = 0;  // recency: larger is more recent (file mtime in ns at scan, then a clock)
    bool part = false;  // a recurrent part (.part), else a whole state (.state)
  };
  // What restore() reads: a whole entry, maybe a part over it (entries_.size(): none), and the
  // prompt tokens the state then holds.
  struct Plan {
    size_t whole, part, use;
  };
  void scan();
  Plan plan_for(bool cut, std::span<const int32_t> prompt, size_t longer_than) const;
  // Opens an entry, checks its head and tokens, lets `read` take its payload, checks the tail.
  void read_entry(const Entry& e, const std::function<void(model::StateSource&)>& read);
  void write_entry(const model::Target& m, std::span<const int32_t> tape, bool part,
                   const std::function<void(model::StateSink&)>& write);
  void discard(size_t i, const std::string& why);
  void evict_to(uint64_t budget, const std::string& keep);
  void touch(Entry& e);
  std::string path(const std::string& file) const { return opt_.dir + "/" + file; }
  void warn(const std::string& line) const;

  StateCacheOptions opt_;
  std::string key_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t bytes_ = 0;
  Counters counters_;
  bool warned_too_large_ = false;
};

}  // namespace sluice::runtime
