#include "store/remote_fill.h"

#include <xxhash.h>

#include <vector>

#include "core/error.h"

namespace sluice::store {

void fill_from_source(ExpertSource* source, Manifest& m, int layer, std::span<const int32_t> ids,
                      std::span<std::byte* const> dst) {
  SLUICE_CHECK(ids.size() == dst.size(), "remote fill: ", ids.size(), " experts for ", dst.size(), " slots");
  if (ids.empty()) return;
  if (!source)
    fail("expert ", ids[0], " of layer ", layer, " has no local copy yet and no source to fetch it from (",
         "streamed install without its sluice-source.json?)");
  std::vector<uint64_t> sums(ids.size());
  source->fetch(m, layer, ids, dst, sums);
  for (size_t k = 0; k < ids.size(); ++k)
    for (Holder& h : m.holders[size_t(layer)][size_t(ids[k])]) {
      h.xxh3 = h.length == m.layout.slot_bytes ? sums[k] : XXH3_64bits(dst[k] + h.at, h.length);
      h.local = true;
    }
}

}  // namespace sluice::store
