// Manifest upgrades from the committed first-format fixture (v1) and from a real prepared model
// (expert bytes never change), refusal of unknown layouts, and router traces feeding `warm`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/durable_file.h"
#include "core/error.h"
#include "fetch/setup.h"
#include "fetch/upgrade.h"
#include "fetch/warm.h"
#include "fetch/stream_source.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/router_trace.h"
#include "store/manifest.h"
#include "store/prepare.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

store::Manifest read_current(const std::string& dir) {
  const store::ExpertBank bank = model::expert_bank_of(dir);
  return store::read_manifest(store::manifest_path(dir), bank,
                              store::model_identity(slurp(dir + "/config.json"), bank.layout));
}

TEST(FetchUpgradeTest, FormatListEndsAtTheCurrentManifestVersion) {
  const auto& v = fetch::manifest_versions();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front().version, 1);
  EXPECT_EQ(v.back().version, store::kManifestVersion);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_EQ(v[i].version, v[i - 1].version + 1);
}

TEST(FetchUpgradeTest, FirstFormatFixtureMigratesToCurrent) {
  testing::TempDir dir("upgrade-fixture");
  const std::string fixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/manifest_v1";
  for (const char* f : {"config.json", "sluice-manifest.json"}) fs::copy_file(fixture + "/" + f, dir / f);
  const std::string original = slurp(dir / "sluice-manifest.json");
  nlohmann::json v1 = nlohmann::json::parse(original);
  ASSERT_EQ(v1["version"], 1);
  try {
    read_current(dir.str());
    FAIL() << "a v1 manifest was read as current";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sluice upgrade"), std::string::npos) << e.what();
  }
  const store::ExpertBank bank = model::expert_bank_of(dir.str());
  fetch::UpgradeResult r = fetch::upgrade_install(dir.str(), bank);
  EXPECT_EQ(r.from, 1);
  EXPECT_EQ(r.to, store::kManifestVersion);
  EXPECT_EQ(slurp(r.backup), original) << "the backup must be the old manifest, byte for byte";
  store::Manifest m = read_current(dir.str());
  size_t holders = 0;
  for (size_t l = 0; l < m.holders.size(); ++l)
    for (size_t e = 0; e < m.holders[l].size(); ++e)
      for (size_t k = 0; k < m.holders[l][e].size(); ++k) {
        const auto& h = m.holders[l][e][k];
        const auto& o = v1["layers"][l][e][k];
        EXPECT_EQ(h.home, o["home"].get<int>());
        EXPECT_EQ(h.file, o["file"].get<std::string>());
        EXPECT_EQ(h.offset, o["offset"].get<uint64_t>());
        EXPECT_EQ(h.length, o["length"].get<uint64_t>());
        char sum[17];
        std::snprintf(sum, sizeof sum, "%016llx", (unsigned long long)h.xxh3);
        EXPECT_EQ(sum, o["xxh3"].get<std::string>());
        EXPECT_TRUE(h.local);
        ++holders;
      }
  EXPECT_GT(holders, 0u);
  // Upgrading a current installation changes nothing.
  std::string now = slurp(dir / "sluice-manifest.json");
  fetch::UpgradeResult again = fetch::upgrade_install(dir.str(), bank);
  EXPECT_EQ(again.from, again.to);
  EXPECT_TRUE(again.backup.empty());
  EXPECT_EQ(slurp(dir / "sluice-manifest.json"), now);
}

TEST(FetchUpgradeTest, UnknownLayoutsAreRefusedUntouched) {
  testing::TempDir dir("upgrade-refuse");
  const std::string fixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/manifest_v1";
  fs::copy_file(fixture + "/config.json", dir / "config.json");
  const store::ExpertBank bank = model::expert_bank_of(dir.str());
  auto expect_refused = [&](const std::string& text, const std::string& want) {
    std::ofstream(dir / "sluice-manifest.json", std::ios::trunc) << text;
    try {
      fetch::upgrade_install(dir.str(), bank);
      ADD_FAILURE() << "upgrade accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_EQ(slurp(dir / "sluice-manifest.json"), text);
  };
  expect_refused(R"({"format": "sluice-expert-manifest", "version": 99})", "newer than this sluice");
  expect_refused(R"({"format": "sluice-expert-manifest", "version": 0})", "unknown layout");
  expect_refused(R"({"format": "someone-elses-layout", "version": 1})", "unknown layout");
  // A v1 manifest that is damaged does not validate after migration: nothing is replaced.
  std::string v1 = slurp(fixture + "/sluice-manifest.json");
  nlohmann::json j = nlohmann::json::parse(v1);
  j["num_experts"] = 5;
  expect_refused(j.dump(1), "does not validate");
  fs::remove(dir / "sluice-manifest.json");
  EXPECT_THROW(fetch::upgrade_install(dir.str(), bank), Error);
}

TEST(FetchUpgradeTest, MigrationNeverTouchesExpertBytes) {
  testing::TempDir dir("upgrade-model");
  model::TinySpec spec = testing::tiny_k3_spec();
  spec.seed = 5;
  const std::string model_dir = dir / "model";
  model::write_tiny_checkpoint(spec, model_dir);
  store::PrepareOptions opt;
  opt.homes = {store::parse_home_spec(dir / "h0"), store::parse_home_spec(dir / "h1")};
  opt.measure = false;
  const store::ExpertBank bank = model::expert_bank_of(model_dir);
  store::prepare_experts(model_dir, bank, opt);
  // The same installation as the first sluice wrote it.
  nlohmann::json j = nlohmann::json::parse(slurp(store::manifest_path(model_dir)));
  j["version"] = 1;
  write_file_durably(store::manifest_path(model_dir), j.dump(1) + "\n");
  std::map<std::string, std::pair<std::string, fs::file_time_type>> homes;
  for (const char* h : {"h0", "h1"})
    for (const auto& e : fs::recursive_directory_iterator(dir / h))
      if (e.is_regular_file()) homes[e.path()] = {slurp(e.path()), fs::last_write_time(e.path())};
  runtime::EngineOptions eo;
  eo.model_dir = model_dir;
  eo.experts = "stream";
  EXPECT_THROW(runtime::Engine::load(eo), Error);
  fetch::upgrade_install(model_dir, bank);
  for (const auto& [path, before] : homes) {
    EXPECT_EQ(slurp(path), before.first) << path;
    EXPECT_EQ(fs::last_write_time(path), before.second) << path;
  }
  std::vector<int32_t> p = {3, 1, 4, 1, 5};
  auto streamed = runtime::Engine::load(eo);
  auto st = streamed->model().new_state();
  auto got = runtime::generate_greedy(streamed->model(), *st, p, {.max_new = 8, .stop_at_eos = false}).generated;
  eo.experts = "resident";
  auto resident = runtime::Engine::load(eo);
  auto st2 = resident->model().new_state();
  auto want = runtime::generate_greedy(resident->model(), *st2, p, {.max_new = 8, .stop_at_eos = false}).generated;
  EXPECT_EQ(got, want);
}

TEST(FetchWarmTest, RouterTracePlansAndFetchesTheMostUsedExperts) {
  testing::TempDir dir("warm");
  model::TinySpec spec = testing::tiny_k3_spec();
  spec.experts = 16;
  spec.seed = 77;
  const std::string src = dir / "source";
  model::write_tiny_checkpoint(spec, src);
  const std::string trace = dir / "trace.jsonl";
  {
    // Record routes with the resident model (the recorder wraps whatever provider is in use).
    runtime::EngineOptions eo;
    eo.model_dir = src;
    eo.experts = "resident";
    auto e = runtime::Engine::load(eo);
    auto& m = e->model();
    runtime::RouteRecorder rec(m.expert_provider(), trace, m.info().num_layers, m.expert_bank()->num_experts);
    m.set_expert_provider(&rec);
    auto st = m.new_state();
    std::vector<int32_t> p = {7, 8, 9, 10};
    runtime::generate_greedy(m, *st, p, {.max_new = 6, .stop_at_eos = false});
    EXPECT_GT(rec.requests(), 0u);
    m.set_expert_provider(nullptr);
  }
  fetch::RouterTrace t = fetch::read_router_trace(trace);
  EXPECT_EQ(t.num_experts, 16);
  EXPECT_GT(t.requests, 0u);

  fetch::SetupOptions so;
  so.source = src;
  so.model_dir = dir / "installed";
  so.mode = "stream";
  so.homes = {dir / "home"};
  so.quiet = true;
  so.expert_bank = model::expert_bank_from_config;
  fetch::setup(so);
  const store::ExpertBank bank = model::expert_bank_of(so.model_dir);
  fetch::WarmReport plan = fetch::warm(so.model_dir, bank, trace, 0, true);
  EXPECT_GT(plan.used, 5u);
  EXPECT_EQ(plan.missing, plan.used);
  EXPECT_EQ(plan.local, 0u);
  EXPECT_GT(plan.bytes_missing, 0u);
  fetch::WarmReport fetched = fetch::warm(so.model_dir, bank, trace, 5, true);
  EXPECT_EQ(fetched.fetched, 5u);
  fetch::WarmReport after = fetch::warm(so.model_dir, bank, trace, 0, true);
  EXPECT_EQ(after.local, 5u);
  EXPECT_EQ(after.missing, plan.used - 5);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(after.ranked[i].local) << "the most used experts are fetched first";

  // A damaged trace is refused with its line.
  std::ofstream(trace, std::ios::app) << "{\"layer\": 1, \"experts\": [99]}\n";
  try {
    fetch::read_router_trace(trace);
    FAIL() << "expert 99 of 16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice
