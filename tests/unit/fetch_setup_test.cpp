// sluice setup against a real HTTP server on loopback (and a local directory): full and stream
// installs generate exactly what the local model generates; dropped connections resume, wrong
// bytes are rejected, 404s give clear errors, and no half-written file ever takes a final name.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "fetch/setup.h"
#include "fetch/sha256.h"
#include "fetch/stream_source.h"
#include "fetch/verify.h"
#include "fetch_test_server.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "store/manifest.h"
#include "store/prepare.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// Experts dominate the bytes, as in the real model (so a stream install is visibly smaller).
model::TinySpec fetch_spec() {
  model::TinySpec s = testing::tiny_k3_spec();
  s.experts = 24;
  s.top_k = 3;
  s.moe_inter = 128;
  s.latent = 64;
  s.shards = 2;
  s.seed = 41;
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> prompt() { return {5, 17, 99, 3, 250, 31, 8}; }

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Generation generate(runtime::Engine& e) {
  Generation g;
  auto& m = e.model();
  auto st = m.new_state();
  auto p = prompt();
  g.logits.resize(p.size() * size_t(m.info().vocab_size));
  m.forward(*st, p, model::PassOptions{.all_logits = true}, g.logits.data());
  auto st2 = m.new_state();
  g.tokens = runtime::generate_greedy(m, *st2, p, {.max_new = 12, .stop_at_eos = false}).generated;
  return g;
}

// Names of the files in `dir` (recursively) that a reader could mistake for finished files.
std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.find(".tmp") != std::string::npos || n.find(".sluice-part") != std::string::npos) out.push_back(n);
  }
  return out;
}

class FetchSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::write_tiny_checkpoint(fetch_spec(), src());
    std::string sums;
    for (const auto& e : fs::directory_iterator(src())) {
      std::string n = e.path().filename().string();
      sums += fetch::sha256_file(e.path().string()) + "  " + n + "\n";
    }
    std::ofstream(src() + "/SHA256SUMS") << sums;
    server_ = std::make_unique<testing::FileServer>(src());
  }
  std::string src() const { return dir_ / "source"; }
  std::string model(const std::string& tag = "model") const { return dir_ / tag; }
  std::string home(const std::string& tag = "home") const { return dir_ / tag; }

  fetch::SetupOptions options(const std::string& mode, const std::string& tag = "model") {
    fetch::SetupOptions o;
    o.source = server_->url();
    o.model_dir = model(tag);
    o.mode = mode;
    o.homes = {home(tag + "-home")};
    o.jobs = 2;
    o.measure = false;
    o.quiet = true;
    o.source_options.retries = 0;
    o.source_options.retry_delay_s = 0.01;
    o.expert_bank = model::expert_bank_from_config;
    return o;
  }

  Generation local_generation() {
    runtime::EngineOptions eo;
    eo.model_dir = src();
    eo.experts = "resident";
    auto e = runtime::Engine::load(eo);
    return generate(*e);
  }

  std::unique_ptr<runtime::Engine> installed_engine(const std::string& tag, fetch::SourceOptions so = {}) {
    runtime::EngineOptions eo;
    eo.model_dir = model(tag);
    eo.experts = "stream";
    eo.cache_gb = 0.002;  // a few dozen experts: evictions happen
    so.retry_delay_s = 0.01;
    eo.stream.source = fetch::StreamSource::open(eo.model_dir, model::expert_bank_of(eo.model_dir), so);
    return runtime::Engine::load(eo);
  }

  // A second process over the installed model: its experts already fetched are read from the
  // homes (each record or part verified against the journal's checksums, none failing), the
  // generation equals `want`, and nothing is fetched from the source again.
  void expect_rerun_fetches_nothing(const Generation& want) {
    const uint64_t served_before = server_->served_total();
    {
      auto e = installed_engine("model");
      Generation got = generate(*e);
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.logits, want.logits);
      EXPECT_EQ(e->store()->counters().fetched, 0u);
      for (const auto& h : e->store()->home_stats()) EXPECT_EQ(h.errors, 0u) << "a record failed its checksum";
    }
    EXPECT_EQ(server_->served_total(), served_before);
  }

  testing::TempDir dir_{"fetch"};
  std::unique_ptr<testing::FileServer> server_;
};

TEST_F(FetchSetupTest, FullInstallOverHttpGeneratesLikeTheLocalModel) {
  fetch::setup(options("full"));
  for (const char* f : {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "generation_config.json"})
    EXPECT_EQ(slurp(model() + "/" + f), slurp(src() + "/" + f)) << f;
  EXPECT_TRUE(leftovers(model()).empty());
  Generation want = local_generation();
  auto e = installed_engine("model");
  Generation got = generate(*e);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(e->store()->counters().fetched, 0u);
  EXPECT_EQ(e->store()->missing(), 0u);
  // Running setup again downloads nothing: every file is finished and recorded.
  const std::string shard = "model-00001-of-00002.safetensors";
  uint64_t before = server_->served(shard);
  fetch::setup(options("full"));
  EXPECT_LT(server_->served(shard) - before, fs::file_size(src() + "/" + shard) / 5)
      << "only the header of a finished shard is read again";
  EXPECT_TRUE(fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true).ok());
}

TEST_F(FetchSetupTest, StreamInstallFetchesExpertsOnFirstUseAndKeepsThem) {
  fetch::setup(options("stream"));
  EXPECT_TRUE(leftovers(model()).empty());
  uint64_t shards = fs::file_size(src() + "/model-00001-of-00002.safetensors") +
                    fs::file_size(src() + "/model-00002-of-00002.safetensors");
  uint64_t expert_bytes = 0, headers = 0;
  for (const auto& s : fetch::read_record(model()).shards) {
    headers += 8 + s.header.size();
    for (const auto& t : s.tensors)
      if (t.name.find(".experts.") != std::string::npos) expert_bytes += t.nbytes;
  }
  EXPECT_GT(expert_bytes, shards / 2);
  uint64_t after_setup = server_->served_total();
  // Non-expert tensors, the headers, the index and the small files; no expert byte.
  uint64_t small = fs::file_size(src() + "/model.safetensors.index.json") + 20000;
  EXPECT_LE(after_setup, shards - expert_bytes + headers + small) << "a stream install downloads the non-expert tensors only";
  Generation want = local_generation();
  uint64_t fetched_first = 0;
  {
    auto e = installed_engine("model");
    uint64_t missing_before = e->store()->missing();
    EXPECT_EQ(missing_before, uint64_t(8 * 24)) << "8 MoE layers x 24 experts, none local yet";
    Generation got = generate(*e);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.logits, want.logits);
    fetched_first = e->store()->counters().fetched;
    EXPECT_GT(fetched_first, 0u);
    EXPECT_EQ(e->store()->missing(), missing_before - fetched_first);
  }
  // A second process finds the fetched experts local (journal) and fetches none of them again.
  expect_rerun_fetches_nothing(want);
  fetch::VerifyReport r = fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.experts_checked, fetched_first);
  EXPECT_EQ(r.experts_missing, 8 * 24 - fetched_first);
}

TEST_F(FetchSetupTest, LocalDirectorySourceWorksForBothModes) {
  Generation want = local_generation();
  for (const char* mode : {"full", "stream"}) {
    fetch::SetupOptions o = options(mode, mode);
    o.source = src();
    fetch::setup(o);
    auto e = installed_engine(mode);
    EXPECT_EQ(generate(*e).tokens, want.tokens) << mode;
  }
}

TEST_F(FetchSetupTest, DroppedConnectionResumesWhereItStopped) {
  const std::string shard = "model-00001-of-00002.safetensors";
  const uint64_t size = fs::file_size(src() + "/" + shard);
  server_->drop_after(shard, size / 2, /*times=*/1000);
  try {
    fetch::setup(options("full"));
    FAIL() << "setup succeeded although the server always dropped the connection";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(shard), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(model() + "/" + shard)) << "a half file took its final name";
  EXPECT_TRUE(fs::exists(model() + "/" + shard + ".sluice-part"));
  EXPECT_FALSE(fs::exists(store::manifest_path(model())));
  server_->clear_faults();
  uint64_t before = server_->served(shard);
  fetch::setup(options("full"));
  uint64_t second = server_->served(shard) - before;
  EXPECT_LT(second, size - size / 4) << "the second run restarted instead of resuming";
  EXPECT_EQ(slurp(model() + "/" + shard), slurp(src() + "/" + shard));
  EXPECT_TRUE(leftovers(model()).empty());
  auto e = installed_engine("model");
  EXPECT_EQ(generate(*e).tokens, local_generation().tokens);
}

TEST_F(FetchSetupTest, RetriesResumeWithinOneRun) {
  const std::string shard = "model-00002-of-00002.safetensors";
  const uint64_t size = fs::file_size(src() + "/" + shard);
  server_->drop_after(shard, size / 3, /*times=*/2);
  fetch::SetupOptions o = options("full");
  o.source_options.retries = 3;
  fetch::setup(o);
  EXPECT_EQ(slurp(model() + "/" + shard), slurp(src() + "/" + shard));
  // Two drops at a third each, then the rest: about one file's worth of bytes, never a restart.
  EXPECT_LE(server_->served(shard), size + size / 3 + 4096);
}

TEST_F(FetchSetupTest, WrongBytesAreRejectedByChecksumAndNothingIsKept) {
  const std::string shard = "model-00002-of-00002.safetensors";
  const uint64_t size = fs::file_size(src() + "/" + shard);
  server_->corrupt(shard, size - 100, size - 90);
  try {
    fetch::setup(options("full"));
    FAIL() << "corrupt shard accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("SHA-256 mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find(shard), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(model() + "/" + shard));
  EXPECT_TRUE(leftovers(model()).empty()) << "the corrupt part must be deleted";
  server_->clear_faults();
  fetch::setup(options("full"));
  EXPECT_EQ(slurp(model() + "/" + shard), slurp(src() + "/" + shard));
}

TEST_F(FetchSetupTest, NotFoundGivesAClearError) {
  server_->set_missing("config.json");
  try {
    fetch::setup(options("full"));
    FAIL() << "setup without config.json succeeded";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(server_->url() + "/config.json"), std::string::npos) << m;
    EXPECT_NE(m.find("not found"), std::string::npos) << m;
  }
  server_->clear_faults();
  server_->set_missing("model-00001-of-00002.safetensors");
  try {
    fetch::setup(options("stream"));
    FAIL() << "setup with a missing shard succeeded";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("model-00001-of-00002.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("not found"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(model() + "/model-00001-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(store::manifest_path(model())));
}

TEST_F(FetchSetupTest, StreamedExpertWithWrongBytesIsRejectedAndFetchedAgainLater) {
  fetch::setup(options("stream"));
  // The expert scale bytes of one shard are served as 0xff: never valid in MXFP4.
  auto rec = fetch::read_record(model());
  std::string victim;
  uint64_t begin = UINT64_MAX, end = 0;
  for (const auto& s : rec.shards)
    for (const auto& t : s.tensors)
      if (t.name.find("weight_scale") != std::string::npos && t.name.find("experts.") != std::string::npos) {
        if (victim.empty()) victim = s.name;
        if (s.name != victim) continue;
        begin = std::min<uint64_t>(begin, t.file_offset);
        end = std::max<uint64_t>(end, t.file_offset + t.nbytes);
      }
  ASSERT_FALSE(victim.empty());
  server_->corrupt(victim, size_t(begin), size_t(end), 0xff, /*fill=*/true);
  bool rejected = false;
  try {
    auto e = installed_engine("model");
    generate(*e);
  } catch (const Error& e) {
    rejected = true;
    EXPECT_NE(std::string(e.what()).find("E8M0 scale"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(rejected) << "corrupt expert bytes were served";
  server_->clear_faults();
  auto e = installed_engine("model");
  Generation got = generate(*e);
  EXPECT_EQ(got.tokens, local_generation().tokens);
  EXPECT_TRUE(fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true).ok());
}

// Flips one bit of the byte at `at` of the file at `path`.
void flip(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(at));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 1);
  f.seekp(std::streamoff(at));
  f.write(&c, 1);
}

TEST_F(FetchSetupTest, VerifyFindsDamageWithoutChangingAnythingAndRepairFixesIt) {
  fetch::setup(options("full"));
  const std::string shard = model() + "/model-00001-of-00002.safetensors";
  const store::ExpertBank bank = model::expert_bank_of(model());
  store::Manifest m = store::read_manifest(store::manifest_path(model()), bank,
                                           store::model_identity(slurp(model() + "/config.json"), bank.layout));
  const store::Holder h = m.of(2, 5)[0];
  const std::string home_file = m.homes[size_t(h.home)].path + "/" + h.file;
  flip(shard, fs::file_size(shard) - 7);
  flip(home_file, h.offset + 100);
  std::string shard_bad = slurp(shard), home_bad = slurp(home_file);
  fetch::VerifyReport r = fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("SHA-256"), std::string::npos) << r.problems[0];
  EXPECT_NE(r.problems[1].find("expert 5 of layer 2"), std::string::npos) << r.problems[1];
  EXPECT_EQ(slurp(shard), shard_bad) << "verify without --repair changed a file";
  EXPECT_EQ(slurp(home_file), home_bad);
  fetch::SourceOptions so;
  so.retries = 0;
  fetch::VerifyReport fixed = fetch::verify_install(model(), model::expert_bank_from_config, true, so, true);
  EXPECT_TRUE(fixed.ok()) << (fixed.unfixed.empty() ? "" : fixed.unfixed[0]);
  EXPECT_EQ(fixed.repaired.size(), 2u);
  EXPECT_EQ(slurp(shard), slurp(src() + "/model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true).ok());
  auto e = installed_engine("model");
  EXPECT_EQ(generate(*e).tokens, local_generation().tokens);
}

// A full install re-placed with every record striped over two homes: a damaged part is found
// by verify and rewritten from the source by --repair (only that part's bytes of the record).
TEST_F(FetchSetupTest, RepairRestoresADamagedStripe) {
  fetch::setup(options("full"));
  const store::ExpertBank bank = model::expert_bank_of(model());
  store::PrepareOptions po;
  po.homes = {store::parse_home_spec(home("s0")), store::parse_home_spec(home("s1"))};
  po.stripe = store::PrepareOptions::Stripe::On;
  po.rebalance = true;
  po.measure = false;
  const store::Manifest m = store::prepare_experts(model(), bank, po);
  ASSERT_EQ(store::parts_of(m.of(2, 5)).size(), 2u) << "the test model's records must span two pages";
  const store::Holder h = m.of(2, 5)[1];
  ASSERT_GT(h.at, 0u);
  const std::string home_file = m.homes[size_t(h.home)].path + "/" + h.file;
  flip(home_file, h.offset + 100);
  fetch::VerifyReport r = fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("expert 5 of layer 2"), std::string::npos) << r.problems[0];
  fetch::SourceOptions so;
  so.retries = 0;
  fetch::VerifyReport fixed = fetch::verify_install(model(), model::expert_bank_from_config, true, so, true);
  EXPECT_TRUE(fixed.ok()) << (fixed.unfixed.empty() ? "" : fixed.unfixed[0]);
  EXPECT_EQ(fixed.repaired.size(), 1u);
  EXPECT_TRUE(fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true).ok());
  auto e = installed_engine("model");
  EXPECT_EQ(generate(*e).tokens, local_generation().tokens);
}

// A stream install striped over two homes: each fetched record's parts land on both homes, the
// journal keeps one checksum per part, and a second process reads them back (verified per part)
// without fetching again; a line torn by a crash is ignored.
TEST_F(FetchSetupTest, StripedStreamInstallFetchesOnceAndKeepsEachPartsChecksum) {
  fetch::SetupOptions o = options("stream");
  o.homes = {home("s0"), home("s1")};
  o.stripe = store::PrepareOptions::Stripe::On;
  fetch::setup(o);
  const store::ExpertBank bank = model::expert_bank_of(model());
  const store::Manifest m = store::read_manifest(store::manifest_path(model()), bank,
                                                 store::model_identity(slurp(model() + "/config.json"), bank.layout));
  ASSERT_EQ(store::parts_of(m.of(2, 5)).size(), 2u) << "the test model's records must span two pages";
  const Generation want = local_generation();
  uint64_t fetched_first = 0;
  {
    auto e = installed_engine("model");
    Generation got = generate(*e);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.logits, want.logits);
    fetched_first = e->store()->counters().fetched;
    EXPECT_GT(fetched_first, 0u);
  }
  // Every journal line has a checksum per part; a torn line appended after them changes nothing.
  const std::string journal = model() + "/" + fetch::kJournalName;
  {
    std::ifstream in(journal);
    size_t lines = 0;
    for (std::string line; std::getline(in, line); ++lines)
      EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 3) << line;
    EXPECT_EQ(lines, fetched_first);
  }
  // A line cut after its first checksum, then one cut inside a checksum.
  std::ofstream(journal, std::ios::app) << "2 5 0123456789abcdef\n2 6 0123456789abcdef 01234";
  expect_rerun_fetches_nothing(want);
  fetch::VerifyReport r = fetch::verify_install(model(), model::expert_bank_from_config, false, {}, true);
  EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.experts_checked, 2 * fetched_first) << "both parts of every fetched record";
}

}  // namespace
}  // namespace sluice
