// The one place a --draft spec becomes a drafter (sluice run and sluice serve share it):
//   off | ngram | model:DIR | dspark:DIR
// model:DIR picks by DIR's config.json and tokenizer: a model whose tokenizer differs from the
// target's (or a qwen3 draft, which always brings its own) drafts through text (TextDrafter); one
// with the target's vocabulary proposes ids directly (ModelDrafter). Any registered architecture
// can draft; it runs on the target's device. dspark:DIR is K3's DSpark block drafter, fed the
// target's hidden rows. New kinds of drafter add a branch here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/target.h"
#include "runtime/speculate/drafter.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

// `target` (loaded from `target_dir`) and `target_tokenizer` must outlive the drafter; the
// tokenizer may be null (a model without tokenizer files: only drafters that propose the
// target's ids work then). Returns null for "off". Throws naming the spec, directory or field
// for anything it cannot build.
std::unique_ptr<Drafter> make_drafter(const std::string& spec, const model::Target& target,
                                      const std::string& target_dir, const tokenizer::Tokenizer* target_tokenizer);

// The --help text of --draft.
extern const char* const kDraftHelp;

}  // namespace sluice::runtime
