// Routed experts fetched from the source on first use: the store's ExpertSource for installs
// made by `sluice setup` (either mode; a --full install never needs it unless repairing). An
// expert's record is assembled from Range requests for its tensors, validated (sizes, dtypes,
// MXFP4 scale bytes), written into its home(s) with fsync, and then recorded in the journal
// sluice-fetched.log ("layer expert xxh3" per line) that adopt() replays on the next start.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fetch/install_record.h"
#include "fetch/source.h"
#include "store/expert_bank.h"
#include "store/expert_source.h"

namespace sluice::fetch {

inline constexpr const char* kJournalName = "sluice-fetched.log";

// Where each routed-expert tensor lies in the source shards.
class ExpertLocator {
 public:
  struct Piece {
    std::string shard;
    uint64_t offset = 0, bytes = 0;  // absolute in the shard file
  };
  ExpertLocator(const InstallRecord& rec, store::ExpertBank bank);
  // The expert's segments in record-layout order (in a fused tensor, the expert's slice); throws
  // naming the tensor if one is missing or has another dtype, size or shape than the bank needs.
  std::vector<Piece> pieces(int layer, int expert) const;
  const store::ExpertBank& bank() const { return bank_; }
  const store::ExpertLayout& layout() const { return bank_.layout; }

 private:
  store::ExpertBank bank_;
  std::map<std::string, std::pair<std::string, const format::TensorInfo*>> tensors_;
};

class StreamSource : public store::ExpertSource {
 public:
  // nullptr when the model directory has no sluice-source.json (not installed by setup). `bank`
  // is the model's (model::expert_bank_of(model_dir)).
  static std::shared_ptr<StreamSource> open(const std::string& model_dir, const store::ExpertBank& bank,
                                            const SourceOptions& opt = {});
  StreamSource(const std::string& model_dir, InstallRecord rec, const store::ExpertBank& bank,
               const SourceOptions& opt);

  void adopt(store::Manifest& m) override;
  void fetch(const store::Manifest& m, int layer, std::span<const int32_t> experts, std::span<std::byte* const> dst,
             std::span<uint64_t> sums) override;

  // The expert's record (slot_bytes, zero padded) from the source, validated; returns its xxh3.
  uint64_t fetch_record(int layer, int expert, std::byte* dst);
  // Writes a record to every holder of the expert (fsync) and appends it to the journal.
  void store_record(const store::Manifest& m, int layer, int expert, const std::byte* record, uint64_t sum);
  const InstallRecord& record() const { return rec_; }
  const store::ExpertLayout& layout() const { return locator_->layout(); }
  int parallel = 8;  // experts fetched at once

 private:
  std::string model_dir_;
  InstallRecord rec_;
  SourceOptions opt_;
  std::mutex source_mu_;
  std::unique_ptr<Source> src_;  // opened on the first fetch
  std::unique_ptr<ExpertLocator> locator_;
  std::mutex journal_mu_;
};

// Applies the journal to `m` (local = true and the xxh3 of every expert listed); returns how many.
size_t replay_journal(const std::string& model_dir, store::Manifest& m);

}  // namespace sluice::fetch
