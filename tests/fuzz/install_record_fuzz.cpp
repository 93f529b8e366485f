// libFuzzer target for the install record (sluice-source.json) and what a --stream install reads
// from it: the input is the record's text. Parsing may only succeed or throw sluice::Error; an
// accepted record's shard headers describe tensors inside their shards, and locating every expert
// of a small fixed bank in it (fetch/stream_source ExpertLocator, as check_source_experts does)
// may only succeed or throw, with pieces that lie inside their shard.
// fuzz-sources: src/fetch/install_record.cpp src/fetch/stream_source.cpp src/fetch/source.cpp
// fuzz-sources: src/fetch/sha256.cpp src/store/home_file.cpp src/store/expert_bank.cpp src/store/manifest.cpp
// fuzz-sources: src/format/safetensors.cpp src/format/json_util.cpp src/core/regular_file.cpp src/core/dtype.cpp
// fuzz-sources: src/core/durable_file.cpp
// fuzz-libs: -lcurl -lcrypto -lxxhash
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuzz_bank.h"
#include "fetch/install_record.h"
#include "fetch/stream_source.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::fetch;
  static const store::ExpertBank bank = testing::fuzz_bank();
  const std::string text(reinterpret_cast<const char*>(data), size);
  InstallRecord r;
  try {
    r = parse_record(text, "/fuzz/model/sluice-source.json");
  } catch (const Error&) {
    return 0;
  }
  check(!r.shards.empty() && (r.mode == "full" || r.mode == "stream"));
  for (const SourceShard& s : r.shards) {
    check(s.size >= 8 + s.header.size());
    for (const auto& t : s.tensors) check(t.file_offset + t.nbytes <= s.size);
  }
  try {
    ExpertLocator loc(r, bank);
    for (int l : bank.moe_layers)
      for (int64_t e = 0; e < bank.num_experts; ++e)
        for (const auto& p : loc.pieces(l, int(e))) check(p.offset + p.bytes <= r.shard(p.shard).size);
  } catch (const Error&) {
  }
  return 0;
}
