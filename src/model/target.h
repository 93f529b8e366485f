// What runtime/, speculate/, serve/ and cli/ see of a model, whatever its architecture: a Target
// (info, the expert bank it streams, passes over a State, commit-prefix after a verify pass,
// snapshots, a state as bytes) and its per-sequence State. Each architecture implements it in
// src/model/arch/ and registers a loader by model_type (model/registry.h). Nothing here names a
// tensor or a device op.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/device.h"
#include "model/pass_options.h"
#include "model/state_io.h"
#include "store/expert_bank.h"
#include "store/expert_provider.h"

namespace sluice::model {

struct TargetInfo {
  std::string model_type;   // config.json's model_type ("kimi_k3", "kimi_linear", "qwen3")
  std::string family;       // the arch/ file set that runs it ("kimi", "qwen3")
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;  // any of them ends a generation; empty: none
  int32_t eos_token_id() const { return eos_token_ids.empty() ? -1 : eos_token_ids.front(); }
  bool is_eos(int32_t id) const;
};

// Running totals a target keeps for --stats.
struct TargetCounters {
  int64_t passes = 0, rows = 0;
  int64_t expert_requests = 0;  // experts asked of the provider (the union per pass and layer)
  int64_t routed_slots = 0;     // rows × top-k per MoE layer
  // Where the host's time in MoE layers went (seconds of wall time, summed over passes): waiting
  // for the route ids (the device's work up to the router), the lease (asking the provider for
  // experts and queueing their work), the experts the host computes itself (with their rows'
  // uploads), and the release (waiting for copies the lease started, and for its compute when
  // views were handed out from host memory). On an asynchronous device the rest of a pass is the
  // host queueing work ahead of the device.
  double moe_route_s = 0, moe_lease_s = 0, moe_host_s = 0, moe_release_s = 0;
};

// A sequence's state on the target's device, preallocated: a pass allocates nothing unless the
// sequence outgrows its capacity (which then doubles). Only its Target reads or writes it.
class State {
 public:
  virtual ~State() = default;
  virtual int64_t length() const = 0;  // positions consumed
  virtual void reset() = 0;            // back to an empty sequence
};

// A saved copy of a State (its length and whatever cannot be cut back, e.g. recurrent matrices),
// allocated once by new_snapshot() and overwritten by each save().
class Snapshot {
 public:
  virtual ~Snapshot() = default;
  virtual int64_t length() const = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  virtual const TargetInfo& info() const = 0;
  virtual device::Device& device() const = 0;

  // The routed experts this model streams (null for a dense model) and where they come from now.
  // Not owned; the resident checkpoint is the default source.
  virtual const store::ExpertBank* expert_bank() const = 0;
  virtual void set_expert_provider(store::ExpertProvider* p) = 0;
  virtual store::ExpertProvider* expert_provider() const = 0;

  virtual std::unique_ptr<State> new_state() const = 0;
  // Runs `tokens` at positions st.length().. and advances the state by tokens.size(); logits
  // receives [rows, vocab] floats on the host, rows = tokens.size() if opt.all_logits else 1.
  virtual void forward(State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) = 0;
  // After a pass run with opt.record, keeps its first n rows (0 <= n <= rows) and drops the rest,
  // leaving the state bit for bit as if only those n rows had been run.
  virtual void commit_prefix(State& st, int64_t n) = 0;

  // Cuts a state back to its first n positions (0 <= n <= length) when the architecture can do so
  // in place (a KV cache: the rows past n are never read again); false when it cannot (recurrent
  // state: restore a snapshot and replay instead).
  virtual bool truncate(State& /*st*/, int64_t /*n*/) const { return false; }
  // Whether truncate() can cut this target's states back (then a saved state also stands for
  // every shorter prefix of its tokens).
  virtual bool can_truncate() const { return false; }

  virtual std::unique_ptr<Snapshot> new_snapshot() const = 0;
  virtual void save(const State& st, Snapshot& snap) const = 0;
  virtual void restore(State& st, const Snapshot& snap) const = 0;

  // A state as bytes (model/state_io.h): its model type and length, then every value that defines
  // it in the order of state_values, downloaded through the device. read_state makes `st` that
  // state exactly (bit for bit, on any device of the same arithmetic), or throws sluice::Error
  // naming what does not fit this target (model type, buffer count or shape, a length the bytes
  // cannot hold) after resetting `st` to an empty sequence. Neither keeps a verify pass's record.
  virtual void write_state(const State& st, StateSink& out) const = 0;
  virtual void read_state(State& st, StateSource& in) const = 0;

  // The part of a state that cannot be cut back (a recurrent target's matrices and convolution
  // windows), as bytes in write_state's framing: its length and those buffers, no cache rows. The
  // prefix cache keeps these for many prefixes at a fraction of a whole state's bytes.
  // read_recurrent over a state that holds at least that many positions of the same tokens (so its
  // cache rows below the length are the ones the saved state had) makes it the saved state bit for
  // bit; it throws sluice::Error, leaving `st` reset, when the bytes do not fit or the state is
  // shorter. Targets that can truncate have no such part and throw.
  virtual void write_recurrent(const State& /*st*/, StateSink& /*out*/) const { no_recurrent_part(); }
  virtual void read_recurrent(State& /*st*/, StateSource& /*in*/) const { no_recurrent_part(); }

  // Every value that defines a state, downloaded in a fixed order (its length first, then the
  // recurrent matrices and the cache rows below its length): two states are the same state when
  // these are bit-identical. For tests and debugging.
  virtual std::vector<float> state_values(const State& st) const = 0;

  // Scratch bytes one row of a pass needs (a prefill chunk is sized from a memory budget with it).
  virtual int64_t pass_bytes_per_row(bool record) const = 0;
  virtual const TargetCounters& counters() const = 0;

  // The token embedding and the lm_head as kept on the device: a drafter that runs on them (DSpark)
  // uses these.
  virtual const device::Weight& embedding() const = 0;
  virtual const device::Weight& lm_head() const = 0;

 private:
  [[noreturn]] void no_recurrent_part() const {
    fail(info().model_type, " states have no recurrent part (they can be cut back instead)");
  }
};

}  // namespace sluice::model
