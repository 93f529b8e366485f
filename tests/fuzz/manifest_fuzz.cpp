// libFuzzer target for the store manifest (sluice-manifest.json): the input is the file's text,
// checked against a small fixed expert bank (2 layers, layer 1 with 2 experts, one 5000-byte
// segment in a two-page slot) and model id "fuzz". Parsing may only succeed or throw
// sluice::Error, and an accepted manifest must match the bank and name only listed homes, plain
// files and aligned parts that tile each slot.
// fuzz-sources: src/store/manifest.cpp src/store/expert_bank.cpp src/format/json_util.cpp
// fuzz-sources: src/format/safetensors.cpp src/core/regular_file.cpp src/core/dtype.cpp
// fuzz-sources: src/core/durable_file.cpp
// fuzz-libs: -lxxhash
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuzz_bank.h"
#include "store/manifest.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::store;
  static const ExpertBank bank = testing::fuzz_bank(5000);
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    Manifest m = parse_manifest(text, "/fuzz/model/sluice-manifest.json", bank, "fuzz");
    check(m.model_id == "fuzz" && !m.homes.empty());
    check(m.num_layers == bank.num_layers && m.num_experts == bank.num_experts);
    check(m.holders.size() == size_t(bank.num_layers));
    for (const Home& h : m.homes) check(!h.path.empty() && h.path[0] == '/');
    for (size_t l = 0; l < m.holders.size(); ++l) {
      check(m.holders[l].size() == (bank.is_moe(int(l)) ? size_t(bank.num_experts) : 0));
      for (const auto& hs : m.holders[l]) {
        check(!hs.empty());
        for (const Holder& h : hs) {
          check(h.home >= 0 && size_t(h.home) < m.homes.size());
          check(!h.file.empty() && h.file[0] != '/' && h.file.find("..") == std::string::npos);
          check(h.offset % ExpertLayout::kAlign == 0 && h.at % ExpertLayout::kAlign == 0 &&
                h.length % ExpertLayout::kAlign == 0 && h.length > 0 && h.at + h.length <= bank.layout.slot_bytes);
        }
        uint64_t next = 0;
        for (const Part& p : parts_of(hs)) {
          check(p.at == next);
          for (const Holder& h : hs) check(h.at != p.at || h.length == p.length);
          next = p.at + p.length;
        }
        check(next == bank.layout.slot_bytes);
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
