// What a caller asks of one forward pass, shared by every architecture.
#pragma once

namespace sluice::model {

struct PassOptions {
  bool all_logits = false;  // logits for every row; otherwise only for the last row
  bool record = false;      // keep what commit_prefix needs (draft verification)
};

}  // namespace sluice::model
