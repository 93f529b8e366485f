// The per-request stats object every response carries.
#include "serve/reply_writer.h"

namespace sluice::serve {

Json ReplyStats::json() const {
  const double decode_s = decode_ms / 1e3;
  return Json{{"ttft_ms", ttft_ms},
              {"prefill_ms", prefill_ms},
              {"decode_ms", decode_ms},
              {"tokens_per_second", decode_s > 0 ? double(decoded) / decode_s : 0.0},
              {"drafts_proposed", drafts_proposed},
              {"drafts_accepted", drafts_accepted},
              {"bytes_read", bytes_read}};
}

}  // namespace sluice::serve
