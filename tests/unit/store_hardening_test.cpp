// Files and options that used to crash, hang or mislead the store (issue 20): reader construction
// failures, cache budgets past physical memory and arenas larger than the bank, FIFOs in place of
// shards, manifests and expert files, relative homes in a manifest, symlinks below a home, and
// strict parsing of numbers and home specs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "store/prepare.h"
#include "store/reader.h"
#include "store/streaming_experts.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

// Runs f on a thread and gives it `seconds`; a call still blocked then (in open() or read() of
// the FIFO at `fifo`) is released by opening the FIFO for writing, so a regression fails the test
// instead of hanging it. Returns f's error message.
std::string error_within(double seconds, const std::string& fifo, const std::function<void()>& f) {
  auto done = std::async(std::launch::async, [&] { return error_of(f); });
  if (done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) return done.get();
  ADD_FAILURE() << "still blocked after " << seconds << " s (on " << fifo << ")";
  for (int i = 0; i < 100 && done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready; ++i) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // a writer that closes: the reader sees EOF
    if (fd >= 0) ::close(fd);
  }
  return done.get();
}

class StoreHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::TinySpec s = testing::tiny_k3_spec();
    s.experts = 8;
    model::write_tiny_checkpoint(s, model_dir());
  }
  std::string model_dir() const { return dir_ / "model"; }
  std::string home() const { return dir_ / "home0"; }
  store::Manifest prepare() {
    store::PrepareOptions opt;
    opt.homes.push_back(store::parse_home_spec(home()));
    opt.measure = false;
    return store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  }
  std::unique_ptr<runtime::Engine> engine(const std::string& experts, double cache_gb = 1) {
    runtime::EngineOptions o;
    o.model_dir = model_dir();
    o.experts = experts;
    o.cache_gb = cache_gb;
    return runtime::Engine::load(o);
  }
  // Generates a few tokens (reading experts when streaming); returns the error, "" when none.
  std::string generate_error(const std::string& experts) {
    return error_of([&] {
      auto e = engine(experts);
      auto s = e->new_session(false);
      const int32_t prompt[] = {1, 2, 3};
      s->generate(prompt, {.max_new = 2, .stop_at_eos = false});
    });
  }
  void replace_with_fifo(const std::string& path) {
    fs::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  }
  testing::TempDir dir_{"store-hardening"};
};

TEST_F(StoreHardeningTest, ReaderOptionsOutOfRangeAreErrorsNotTerminate) {
  store::Manifest m = prepare();
  // 32768 per home once needed 65536 io_uring entries (refused), fell back to 32768 pread threads
  // and could end in std::terminate from the constructor; it is now a range error before any thread.
  for (int qd : {0, -3, store::kMaxQueueDepth + 1, 32768}) {
    store::ReaderOptions ro;
    ro.queue_depth = qd;
    std::string err = error_of([&] { store::ExpertReader r(m, ro); });
    EXPECT_NE(err.find("queue depth " + std::to_string(qd)), std::string::npos) << err;
  }
  store::ReaderOptions bogus;
  bogus.engine = "bogus";
  EXPECT_NE(error_of([&] { store::ExpertReader r(m, bogus); }).find("'bogus'"), std::string::npos);
  store::ReaderOptions most;
  most.queue_depth = store::kMaxQueueDepth;
  most.engine = "pread";  // the most threads: kMaxQueueDepth per home
  EXPECT_EQ(error_of([&] { store::ExpertReader r(m, most); }), "");
}

TEST_F(StoreHardeningTest, CacheArenaIsNoLargerThanTheBank) {
  store::Manifest m = prepare();
  uint64_t bank_experts = 0;
  for (const auto& layer : m.holders) bank_experts += layer.size();
  ASSERT_GT(bank_experts, 2u);
  ASSERT_LT(bank_experts * m.layout.slot_bytes, uint64_t(1e9));
  auto e = engine("stream", 1.0);  // 1 GB budget, a bank of a few MB: the arena holds the bank only
  EXPECT_EQ(e->store()->slots(), bank_experts);
  // A budget below the bank still sets the slot count.
  auto small = engine("stream", double(m.layout.slot_bytes * 3) / 1e9);
  EXPECT_EQ(small->store()->slots(), 3u);
}

TEST_F(StoreHardeningTest, CacheBudgetAbovePhysicalMemoryIsRefusedWithNumbers) {
  prepare();
  const uint64_t physical = store::physical_memory_bytes();
  ASSERT_GT(physical, 0u);
  for (double gb : {double(physical) * 2 / 1e9, 100000.0, 1e300}) {
    std::string err = error_of([&] { engine("stream", gb); });
    EXPECT_NE(err.find("GB of memory"), std::string::npos) << gb << ": " << err;
  }
}

TEST_F(StoreHardeningTest, FifoInPlaceOfAShardIsRefusedByName) {
  const std::string shard = model_dir() + "/model-00002-of-00002.safetensors";
  replace_with_fifo(shard);
  std::string err = error_within(10, shard, [&] { engine("resident"); });
  EXPECT_NE(err.find("model-00002-of-00002.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("FIFO"), std::string::npos) << err;
  // The loader itself refuses it too (no pre-check): it opens shards without blocking.
  err = error_within(10, shard, [&] { format::TensorSet::open_dir(model_dir()); });
  EXPECT_NE(err.find("FIFO"), std::string::npos) << err;
}

TEST_F(StoreHardeningTest, FifoInPlaceOfTheManifestIsRefusedByName) {
  prepare();
  const std::string manifest = store::manifest_path(model_dir());
  replace_with_fifo(manifest);
  std::string err = error_within(10, manifest, [&] { engine("stream"); });
  EXPECT_NE(err.find("sluice-manifest.json"), std::string::npos) << err;
  EXPECT_NE(err.find("FIFO"), std::string::npos) << err;
}

TEST_F(StoreHardeningTest, FifoInPlaceOfAnExpertFileFailsTheReadByName) {
  store::Manifest m = prepare();
  const std::string file = home() + "/" + m.of(1, 0)[0].file;
  replace_with_fifo(file);
  std::string err = error_within(20, file, [&] {
    std::string e = generate_error("stream");
    if (!e.empty()) throw Error(e);
  });
  EXPECT_NE(err.find(m.of(1, 0)[0].file), std::string::npos) << err;
  EXPECT_NE(err.find("FIFO"), std::string::npos) << err;
}

// Two homes swapped: each home's layer files keep their sizes but must hold the other half of the
// experts. A prepare that kept a file for its size alone left every record failing its checksum.
TEST_F(StoreHardeningTest, PrepareAgainOntoSwappedHomesRewritesTheirFiles) {
  auto prepare_onto = [&](const std::vector<std::string>& homes) {
    store::PrepareOptions opt;
    for (const auto& h : homes) opt.homes.push_back(store::parse_home_spec(h));
    opt.measure = false;
    return store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  };
  const std::string a = dir_ / "a", b = dir_ / "b";
  store::Manifest first = prepare_onto({a, b});
  ASSERT_EQ(generate_error("stream"), "");
  store::Manifest second = prepare_onto({b, a});
  const auto& was = first.of(1, 0)[0];
  const auto& now = second.of(1, 0)[0];
  ASSERT_EQ(was.file, now.file);
  ASSERT_NE(first.homes[size_t(was.home)].path, second.homes[size_t(now.home)].path)
      << "the swap should move expert 0 of layer 1 to the other home";
  EXPECT_EQ(generate_error("stream"), "");
}

TEST_F(StoreHardeningTest, RelativeHomeInAManifestIsRelativeToTheManifest) {
  const std::string ref = [&] {
    auto e = engine("resident");
    auto s = e->new_session(false);
    const int32_t prompt[] = {1, 2, 3};
    auto r = s->generate(prompt, {.max_new = 4, .stop_at_eos = false});
    return ::testing::PrintToString(r.generated);
  }();
  prepare();
  const std::string manifest = store::manifest_path(model_dir());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(manifest));
  j["homes"][0]["path"] = "../home0";  // the home beside the model directory
  std::ofstream(manifest) << j.dump();
  // Run from a directory where "../home0" is something else (nothing).
  const fs::path cwd = fs::current_path();
  fs::create_directories(dir_ / "elsewhere/deeper");
  fs::current_path(dir_ / "elsewhere/deeper");
  std::string got, err;
  err = error_of([&] {
    auto e = engine("stream");
    EXPECT_EQ(e->store()->manifest().homes[0].path, home());
    auto s = e->new_session(false);
    const int32_t prompt[] = {1, 2, 3};
    got = ::testing::PrintToString(s->generate(prompt, {.max_new = 4, .stop_at_eos = false}).generated);
  });
  fs::current_path(cwd);
  EXPECT_EQ(err, "");
  EXPECT_EQ(got, ref);
}

TEST_F(StoreHardeningTest, SymlinksBelowAHomeAreRefused) {
  store::Manifest m = prepare();
  EXPECT_EQ(generate_error("stream"), "");
  // An expert file that is a symlink (to an identical copy, so only the link itself is wrong).
  const std::string file = home() + "/" + m.of(1, 0)[0].file;
  fs::copy_file(file, dir_ / "copy.bin");
  fs::remove(file);
  fs::create_symlink(dir_ / "copy.bin", file);
  std::string err = generate_error("stream");
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
  EXPECT_NE(err.find(m.of(1, 0)[0].file), std::string::npos) << err;
  // The model's folder inside the home as a symlink to a real copy of it.
  fs::remove(file);
  fs::rename(dir_ / "copy.bin", file);
  const std::string folder = home() + "/" + m.model_id;
  fs::rename(folder, dir_ / "folder");
  fs::create_directory_symlink(dir_ / "folder", folder);
  err = generate_error("stream");
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
  // The home itself may be a symlink (a mount point the user chose).
  fs::remove(folder);
  fs::rename(dir_ / "folder", folder);
  fs::rename(home(), dir_ / "real-home");
  fs::create_directory_symlink(dir_ / "real-home", home());
  EXPECT_EQ(generate_error("stream"), "");
}

TEST(HomeSpec, CapacityMustBeASize) {
  EXPECT_EQ(store::parse_home_spec("/a/b").capacity_bytes, 0u);
  EXPECT_EQ(store::parse_home_spec("/a/b:900G").capacity_bytes, 900'000'000'000u);
  EXPECT_EQ(store::parse_home_spec("/a/b:1.5K").capacity_bytes, 1500u);
  EXPECT_EQ(store::parse_home_spec("/a/b:4096").path, "/a/b");
  for (const char* bad : {"/a/b:abc", "/a/b:", "/a/b:0", "/a/b:0.0001", "/a/b:-5G", "/a/b:1e3", "/a/b:inf",
                          "/a/b:nan", "/a/b:10X", "/a/b:5000000000T", ":10G"}) {
    std::string err = error_of([&] { store::parse_home_spec(bad); });
    EXPECT_NE(err.find(bad), std::string::npos) << bad << " gave: " << err;
  }
}

TEST(StrictNumbers, PlainDecimalInRangeOnly) {
  EXPECT_EQ(parse_integer("010", "n", 0, 100), 10);  // not octal
  EXPECT_EQ(parse_integer("-4", "n", -10, 10), -4);
  EXPECT_DOUBLE_EQ(parse_decimal("2.5", "x", 0, 10), 2.5);
  for (const char* bad : {"0x10", "1e3", "", "-", "+4", " 4", "4 ", "12abc", "99999999999999999999"})
    EXPECT_NE(error_of([&] { parse_integer(bad, "n", 0, INT64_MAX); }), "") << bad;
  for (const char* bad : {"inf", "nan", "1e3", "1.2.3", ".", "-1"})
    EXPECT_NE(error_of([&] { parse_decimal(bad, "x", 0, 1e9); }), "") << bad;
  EXPECT_EQ(error_of([&] { parse_integer("101", "--n", 0, 100); }), "--n: 101 is outside 0..100");
}

}  // namespace
}  // namespace sluice
