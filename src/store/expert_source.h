// Where the experts of a streamed install come from before they are local: the store calls an
// ExpertSource for an expert whose manifest holders are not yet local (`Holder::local` false).
// The implementation (src/fetch) fetches, verifies and stores the record in its home durably.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "store/manifest.h"

namespace sluice::store {

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Called once when the store opens, before any read: marks the experts this source made local
  // since the manifest was written (local = true, their xxh3) so that they are read from the homes.
  virtual void adopt(Manifest& m) = 0;
  // Fills dst[i] (slot_bytes, 4 KiB aligned) with the record of experts[i] of `layer` (none of
  // them local), verified, and stores it durably at each of its holders; sums[i] receives the
  // record's xxh3 (over slot_bytes). Throws sluice::Error naming the expert and the source.
  virtual void fetch(const Manifest& m, int layer, std::span<const int32_t> experts, std::span<std::byte* const> dst,
                     std::span<uint64_t> sums) = 0;
};

}  // namespace sluice::store
