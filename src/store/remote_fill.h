// Remote fill: experts of a streamed install (`sluice setup --stream`) that are not local yet are
// fetched from the install's source into the cache's slots on first use, and from then on read
// from their homes like every other expert. The cache decides which slots; this is the rest.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "store/expert_source.h"
#include "store/manifest.h"

namespace sluice::store {

// Fetches experts `ids` of `layer` (none local) from `source` (null: refused, naming the first
// expert) into dst[i] (slot_bytes each), then marks their holders local with the xxh3 the source
// returned for a whole record, or of its part's bytes for a striped one, so later reads verify
// against them. No read of these experts may be in flight (the reader threads never see their
// holders change). Throws what the source throws, leaving the holders as they were.
void fill_from_source(ExpertSource* source, Manifest& m, int layer, std::span<const int32_t> ids,
                      std::span<std::byte* const> dst);

}  // namespace sluice::store
