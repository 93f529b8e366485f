// `sluice setup`: installs a model from a source. --full downloads every shard (parallel,
// resumable, checked) and prepares the experts onto the homes; --stream downloads only the
// non-expert tensors into local safetensors files and writes a manifest whose experts are
// fetched on first use (StreamSource). Every file appears under its final name only when whole
// and verified; running setup again resumes where an interrupted one stopped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fetch/install_record.h"
#include "fetch/source.h"
#include "store/expert_bank.h"
#include "store/prepare.h"

namespace sluice::fetch {

struct SetupOptions {
  std::string source, model_dir;
  std::string mode;                // "full" or "stream"
  std::vector<std::string> homes;  // PATH[:CAPACITY]; default <model>/sluice-home
  int jobs = 4;                    // parallel downloads
  bool measure = true;             // measure home bandwidth in prepare (--full)
  bool quiet = false;              // no progress bars
  // Records whole or striped across the homes (store::PrepareOptions::stripe), in both modes.
  store::PrepareOptions::Stripe stripe = store::PrepareOptions::Stripe::Auto;
  SourceOptions source_options;
  // The expert bank of the source's config.json (model::expert_bank_from_config); required. It is
  // asked before anything is downloaded, so a config no architecture knows fails early.
  store::ExpertBankFromConfig expert_bank;
};

void setup(const SetupOptions& opt);

// Downloads `name` from `src` to `dir`/`name` through `dir`/`name`.sluice-part, resuming a part
// left by an interrupted run; checks the size, and the SHA-256 when `sha256` is not empty (a
// mismatch deletes the part and throws). Returns the SHA-256 of the file.
class Progress;
std::string download_file(Source& src, const std::string& name, uint64_t size, const std::string& sha256,
                          const std::string& dir, Progress* progress);

// Writes the non-expert tensors of source shard `shard` into `dir`/`shard.name` (a valid
// safetensors file), through a part file with a journal of finished ranges (resumable).
FileEntry build_local_shard(Source& src, const SourceShard& shard, const std::vector<std::string>& keep,
                            const std::string& dir, Progress* progress);

}  // namespace sluice::fetch
