// --draft spec -> drafter.
#include "runtime/speculate/make_drafter.h"

#include "core/error.h"
#include "format/json_util.h"
#include "model/registry.h"
#include "runtime/speculate/draft_lm.h"
#include "runtime/speculate/dspark_drafter.h"
#include "runtime/speculate/model_drafter.h"
#include "runtime/speculate/text_drafter.h"

namespace sluice::runtime {
namespace {

std::unique_ptr<Drafter> text_drafter(std::unique_ptr<DraftLm> lm, std::unique_ptr<tokenizer::Tokenizer> draft_tok,
                                      const std::string& draft_dir, const std::string& target_dir,
                                      const tokenizer::Tokenizer* target_tok) {
  if (!draft_tok)
    fail("--draft model:", draft_dir, ": no tokenizer (tokenizer.json or tiktoken.model); drafting with a model of ",
         "another vocabulary goes through text and needs it");
  if (!target_tok)
    fail("--draft model:", draft_dir, ": the target ", target_dir, " has no tokenizer; drafting with a model of ",
         "another vocabulary goes through text and needs it");
  return std::make_unique<TextDrafter>(std::move(lm), std::move(draft_tok), *target_tok);
}

}  // namespace

const char* const kDraftHelp =
    "Drafter: off, ngram (prompt lookup), model:DIR or dspark:DIR. model:DIR: a draft (kimi_k3, kimi_linear, "
    "qwen3) with the target's tokenizer proposes ids directly; a qwen3 draft (or any with its own tokenizer) "
    "drafts through text. dspark:DIR: a K3 DSpark block drafter fed the target's hidden rows. The target verifies "
    "every drafted token: greedy output is that of --draft off, and sampling keeps the target's distribution";

std::unique_ptr<Drafter> make_drafter(const std::string& spec, const model::Target& target,
                                      const std::string& target_dir, const tokenizer::Tokenizer* target_tokenizer) {
  const int64_t target_vocab = target.info().vocab_size;
  if (spec == "off") return nullptr;
  if (spec == "ngram") return std::make_unique<NgramDrafter>();
  if (spec.rfind("dspark:", 0) == 0) return DSparkDrafter::load(spec.substr(7), target);
  if (spec.rfind("model:", 0) == 0) {
    const std::string dir = spec.substr(6);
    if (dir.empty()) fail("--draft model:DIR needs a directory");
    const std::string type = format::read_model_type(dir);
    const model::LoadOptions lo{.dir = dir, .device = &target.device()};
    if (type == "qwen3")
      return text_drafter(make_draft_lm(model::load_target(lo)), tokenizer::load_tokenizer(dir), dir, target_dir,
                          target_tokenizer);
    model::find_architecture(type, dir + "/config.json");  // refuses what sluice cannot run, by name
    std::unique_ptr<tokenizer::Tokenizer> draft_tok = tokenizer::load_tokenizer(dir);
    // A draft without tokenizer files is taken to share the target's (as before text drafting).
    if (draft_tok && target_tokenizer && !tokenizer::same_vocabulary(*draft_tok, *target_tokenizer))
      return text_drafter(make_draft_lm(model::load_target(lo)), std::move(draft_tok), dir, target_dir,
                          target_tokenizer);
    return std::make_unique<ModelDrafter>(model::load_target(lo), target_vocab);
  }
  fail("--draft '", spec, "' is not off, ngram, model:DIR or dspark:DIR");
}

}  // namespace sluice::runtime
