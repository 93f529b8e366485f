// The one place a --draft spec becomes a drafter (sluice run and sluice serve share it):
//   off | ngram | model:DIR
// model:DIR picks by DIR's config.json: a qwen3 model, or any model whose tokenizer differs from
// the target's, drafts through text (TextDrafter); a kimi_* model with the target's vocabulary
// proposes ids directly (ModelDrafter). New kinds of drafter add a branch here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/speculate/drafter.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

// `target_tokenizer` may be null (a model without tokenizer files: only same-vocabulary drafters
// work then); when given it must outlive the drafter. Returns null for "off". Throws naming the
// spec, directory or field for anything it cannot build.
std::unique_ptr<Drafter> make_drafter(const std::string& spec, const std::string& target_dir, int64_t target_vocab,
                                      const tokenizer::Tokenizer* target_tokenizer);

// The --help text of --draft.
extern const char* const kDraftHelp;

}  // namespace sluice::runtime
