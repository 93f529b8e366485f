// The one place a --draft spec becomes a drafter (sluice run and sluice serve share it):
//   off | ngram | model:DIR | dspark:DIR
// model:DIR picks by DIR's config.json: a qwen3 model, or any model whose tokenizer differs from
// the target's, drafts through text (TextDrafter); a kimi_* model with the target's vocabulary
// proposes ids directly (ModelDrafter). dspark:DIR is K3's DSpark block drafter, fed the
// target's hidden rows. New kinds of drafter add a branch here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/kimi.h"
#include "runtime/speculate/drafter.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

// `target` (loaded from `target_dir`) and `target_tokenizer` must outlive the drafter; the
// tokenizer may be null (a model without tokenizer files: only drafters that propose the
// target's ids work then). Returns null for "off". Throws naming the spec, directory or field
// for anything it cannot build.
std::unique_ptr<Drafter> make_drafter(const std::string& spec, const model::KimiModel& target,
                                      const std::string& target_dir, const tokenizer::Tokenizer* target_tokenizer);

// The --help text of --draft.
extern const char* const kDraftHelp;

}  // namespace sluice::runtime
