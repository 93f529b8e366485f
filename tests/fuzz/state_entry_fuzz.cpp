// libFuzzer target for the state cache's entry files (runtime/state_cache.h): the input is one
// file's bytes, written into a cache directory under the name its tokens give (when its head holds
// them) and, when its kind field is 0 or 1, with its trailing xxh3 made right, so that mutations
// reach the state part. A fake target reads a small state (its length, a count, that many floats;
// can_truncate when the file's first token is even). Kind 1 (a recurrent part) is written as a
// .part file beside a valid whole entry that holds its tokens and one more, for a target that
// cannot cut back, so that the restore reads the part over the whole one. Scanning and restoring
// may only keep the entry or discard it with a warning; a restore gives the entry's tokens (or, cut
// back, the prompt's) and exactly the file's values, never a partly read state.
// fuzz-sources: src/runtime/state_cache.cpp src/runtime/conversation.cpp src/core/regular_file.cpp
// fuzz-sources: src/core/durable_file.cpp
// fuzz-libs: -lxxhash
#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/state_cache.h"

namespace {

using namespace sluice;

void check(bool ok) {
  if (!ok) std::abort();
}

const char* const kKey = "0123456789abcdef";

class FakeState final : public model::State {
 public:
  int64_t length() const override { return length_; }
  void reset() override {
    length_ = 0;
    values.clear();
  }
  int64_t length_ = 0;
  std::vector<float> values;
};

// Only what the cache calls is implemented; the rest is never reached.
class FakeTarget final : public model::Target {
 public:
  bool cut = false;
  const model::TargetInfo& info() const override { return info_; }
  device::Device& device() const override { std::abort(); }
  const store::ExpertBank* expert_bank() const override { return nullptr; }
  void set_expert_provider(store::ExpertProvider*) override {}
  store::ExpertProvider* expert_provider() const override { return nullptr; }
  std::unique_ptr<model::State> new_state() const override { return std::make_unique<FakeState>(); }
  void forward(model::State&, std::span<const int32_t>, const model::PassOptions&, float*) override { std::abort(); }
  void commit_prefix(model::State&, int64_t) override { std::abort(); }
  bool truncate(model::State& st, int64_t n) const override {
    check(cut && n >= 0 && n <= st.length());
    static_cast<FakeState&>(st).length_ = n;
    return true;
  }
  bool can_truncate() const override { return cut; }
  std::unique_ptr<model::Snapshot> new_snapshot() const override { std::abort(); }
  void save(const model::State&, model::Snapshot&) const override { std::abort(); }
  void restore(model::State&, const model::Snapshot&) const override { std::abort(); }
  void write_state(const model::State& state, model::StateSink& out) const override {
    const auto& st = static_cast<const FakeState&>(state);
    const uint64_t length = uint64_t(st.length_), n = st.values.size();
    out.write(&length, 8);
    out.write(&n, 8);
    out.write(st.values.data(), n * 4);
  }
  void read_state(model::State& state, model::StateSource& in) const override {
    auto& st = static_cast<FakeState&>(state);
    st.reset();
    uint64_t length = 0, n = 0;
    in.read(&length, 8);
    in.read(&n, 8);
    if (n > in.remaining() / 4 || n * 4 != in.remaining() || length > (uint64_t(1) << 40)) fail("bad fake state");
    st.values.resize(n);
    in.read(st.values.data(), n * 4);
    st.length_ = int64_t(length);
  }
  // A part: the same layout, over a state that holds at least its length.
  void read_recurrent(model::State& state, model::StateSource& in) const override {
    auto& st = static_cast<FakeState&>(state);
    uint64_t length = 0, n = 0;
    in.read(&length, 8);
    in.read(&n, 8);
    if (n > in.remaining() / 4 || n * 4 != in.remaining() || length > uint64_t(st.length_)) fail("bad fake part");
    st.values.resize(n);
    in.read(st.values.data(), n * 4);
    st.length_ = int64_t(length);
  }
  std::vector<float> state_values(const model::State&) const override { return {}; }
  int64_t pass_bytes_per_row(bool) const override { return 0; }
  const model::TargetCounters& counters() const override { return counters_; }
  const device::Weight& embedding() const override { std::abort(); }
  const device::Weight& lm_head() const override { std::abort(); }

 private:
  model::TargetInfo info_;
  model::TargetCounters counters_;
};

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sluice-state-entry-fuzz-XXXXXX";
    check(::mkdtemp(tmpl) != nullptr);
    return std::string(tmpl);
  }();
  std::vector<uint8_t> file(data, data + size);
  // The tokens, when the head holds a count that fits (magic 8, version 4, kind 4, key 16, count 8).
  std::vector<int32_t> tokens;
  if (size >= 40) {
    uint64_t n = 0;
    std::memcpy(&n, data + 32, 8);
    if (n > 0 && n <= (size - 40) / 4) {
      tokens.resize(n);
      std::memcpy(tokens.data(), data + 40, n * 4);
    }
  }
  uint32_t kind = 0;
  if (size >= 16) std::memcpy(&kind, data + 12, 4);
  if (size >= 48 && kind <= 1) {
    const uint64_t sum = XXH3_64bits(file.data(), file.size() - 8);
    std::memcpy(file.data() + file.size() - 8, &sum, 8);
  }
  // A part needs a whole entry of its tokens and one more beside it (written here; a negative
  // token would make that one invalid too).
  const bool part = kind == 1 && !tokens.empty() && std::all_of(tokens.begin(), tokens.end(), [](int32_t t) { return t >= 0; });
  auto name_of = [](const std::vector<int32_t>& t, const char* suffix) {
    return std::string(kKey) + "-" + (t.empty() ? std::string(16, '0') : hex16(XXH3_64bits(t.data(), t.size() * 4))) +
           suffix;
  };
  FakeTarget m;
  m.cut = !part && !tokens.empty() && tokens[0] % 2 == 0;
  if (part) {
    // A valid whole entry of the part's tokens and one the prompt does not have (the fake state:
    // its length, 2 values).
    std::vector<int32_t> whole = tokens;
    whole.push_back(9);
    const uint64_t n = whole.size(), length = n, values = 2, payload = 16 + 8;
    const float v[2] = {1.5f, -2.0f};
    std::vector<uint8_t> w(40);
    std::memcpy(w.data(), "SLUICEST\x01\x00\x00\x00\x00\x00\x00\x00", 16);
    std::memcpy(w.data() + 16, kKey, 16);
    std::memcpy(w.data() + 32, &n, 8);
    auto put = [&](const void* p, size_t k) { w.insert(w.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + k); };
    put(whole.data(), n * 4);
    put(&length, 8);
    put(&values, 8);
    put(v, 8);
    put(&payload, 8);
    const uint64_t sum = XXH3_64bits(w.data(), w.size());
    put(&sum, 8);
    std::ofstream out(dir + "/" + name_of(whole, ".state"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size()));
  }
  {
    std::ofstream out(dir + "/" + name_of(tokens, part ? ".part" : ".state"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
  }
  int warnings = 0;
  try {
    runtime::StateCache cache({.dir = dir, .budget_bytes = uint64_t(1) << 30,
                               .warn = [&](const std::string& w) { check(!w.empty()); ++warnings; }},
                              kKey);
    const size_t extra = part ? 1 : 0;  // the whole entry beside a part
    check(cache.entries() <= 1 + extra && (cache.entries() == 1 + extra) == (warnings == 0));
    FakeState st;
    std::vector<int32_t> prompt = tokens;
    prompt.push_back(7);
    if (m.cut && prompt.size() > 2) prompt[prompt.size() - 2] ^= 1;  // diverge at the last token: a cut
    const size_t got = cache.restore(m, st, prompt, 0);
    if (got > 0) {
      check(int64_t(got) == st.length() && got < prompt.size());
      check(got == tokens.size() || (m.cut && got < tokens.size()));
      uint64_t n = 0;
      std::memcpy(&n, file.data() + 40 + tokens.size() * 4 + 8, 8);
      check(st.values.size() == n &&
            (n == 0 || std::memcmp(st.values.data(), file.data() + 40 + tokens.size() * 4 + 16, n * 4) == 0));
    } else {
      check(st.length() == 0 && st.values.empty());
    }
    check(cache.entries() == (got > 0 ? 1u : 0u) + extra || (got == 0 && cache.entries() == 1 + extra && warnings == 0));
  } catch (const Error&) {
    std::abort();  // a bad entry is discarded, never thrown out of the cache
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove(e.path(), ec);
  return 0;
}
