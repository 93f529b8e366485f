// libFuzzer target for the state cache's entry files (runtime/state_cache.h): the input is one
// file's bytes, written into a cache directory under the name its tokens give (when its head holds
// them) and, when its reserved field is zero, with its trailing xxh3 made right, so that mutations
// reach the state part. A fake target reads a small state (its length, a count, that many floats;
// can_truncate when the file's first token is even). Scanning and restoring may only keep the
// entry or discard it with a warning; a restore gives the entry's tokens (or, cut back, the
// prompt's) and exactly the file's values, never a partly read state.
// fuzz-sources: src/runtime/state_cache.cpp src/runtime/conversation.cpp src/core/regular_file.cpp
// fuzz-sources: src/core/durable_file.cpp
// fuzz-libs: -lxxhash
#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
  void write_state(const model::State&, model::StateSink&) const override { std::abort(); }
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
  // The tokens, when the head holds a count that fits (magic 8, version 4, reserved 4, key 16, count 8).
  std::vector<int32_t> tokens;
  if (size >= 40) {
    uint64_t n = 0;
    std::memcpy(&n, data + 32, 8);
    if (n > 0 && n <= (size - 40) / 4) {
      tokens.resize(n);
      std::memcpy(tokens.data(), data + 40, n * 4);
    }
  }
  uint32_t reserved = 0;
  if (size >= 16) std::memcpy(&reserved, data + 12, 4);
  if (size >= 48 && reserved == 0) {
    const uint64_t sum = XXH3_64bits(file.data(), file.size() - 8);
    std::memcpy(file.data() + file.size() - 8, &sum, 8);
  }
  const std::string name = std::string(kKey) + "-" +
                           (tokens.empty() ? std::string(16, '0') : hex16(XXH3_64bits(tokens.data(), tokens.size() * 4))) +
                           ".state";
  {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
  }
  int warnings = 0;
  try {
    runtime::StateCache cache({.dir = dir, .budget_bytes = uint64_t(1) << 30,
                               .warn = [&](const std::string& w) { check(!w.empty()); ++warnings; }},
                              kKey);
    check(cache.entries() <= 1 && (cache.entries() == 1) == (warnings == 0));
    FakeTarget m;
    m.cut = !tokens.empty() && tokens[0] % 2 == 0;
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
    check(cache.entries() == (got > 0 ? 1u : 0u) || (got == 0 && cache.entries() == 1 && warnings == 0));
  } catch (const Error&) {
    std::abort();  // a bad entry is discarded, never thrown out of the cache
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove(e.path(), ec);
  return 0;
}
