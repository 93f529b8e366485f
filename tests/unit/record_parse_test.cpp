// The manifest and install-record parsers from text (parse_manifest, parse_record; the fuzz
// targets' entry points): the committed seeds are accepted or refused as their names say, and
// numbers that do not fit are refused by name instead of being narrowed or wrapped.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "../fuzz/fuzz_bank.h"
#include "core/error.h"
#include "error_of.h"
#include "fetch/install_record.h"
#include "store/manifest.h"

namespace sluice {
namespace {

std::string seed(const std::string& target, const std::string& name) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/tests/fuzz/corpus/" + target + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << target << "/" << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using testing::fuzz_bank;

using testing::expect_error_of;

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(RecordParse, ManifestSeedsAndNumbersOutOfRange) {
  const store::ExpertBank bank = fuzz_bank(5000);
  const std::string path = "/m/sluice-manifest.json";
  store::Manifest m = store::parse_manifest(seed("manifest_fuzz", "valid_two_homes"), path, bank, "fuzz");
  ASSERT_EQ(m.homes.size(), 2u);
  EXPECT_EQ(m.homes[1].path, "/m/home1");  // relative to the manifest's directory
  EXPECT_EQ(m.of(1, 1).size(), 2u);
  EXPECT_FALSE(m.of(1, 1)[0].local);
  // Striped: expert 0 in two parts on two homes; expert 1's second part has a second copy.
  store::Manifest s = store::parse_manifest(seed("manifest_fuzz", "valid_striped"), path, bank, "fuzz");
  EXPECT_EQ(store::parts_of(s.of(1, 0)), (std::vector<store::Part>{{0, 4096}, {4096, 4096}}));
  EXPECT_EQ(store::copies_of(s.of(1, 1)), 1u);
  EXPECT_EQ(s.of(1, 1).size(), 3u);
  EXPECT_EQ(s.of(1, 1)[2].at, 4096u);
  // 4294967296 used to be narrowed to int 0, a listed home.
  EXPECT_CONTAINS(expect_error_of([&] { store::parse_manifest(seed("manifest_fuzz", "bad_home_past_int"), path, bank, "fuzz"); }),
                  "holder names home 4294967296 which is not listed");
  EXPECT_CONTAINS(expect_error_of([&] { store::parse_manifest(seed("manifest_fuzz", "bad_negative_offset"), path, bank, "fuzz"); }),
                  "layer 1 expert 0: holder offset must not be negative");
  EXPECT_CONTAINS(expect_error_of([&] { store::parse_manifest(seed("manifest_fuzz", "bad_file_escapes"), path, bank, "fuzz"); }),
                  "must be a plain path inside its home");
  EXPECT_CONTAINS(expect_error_of([&] { store::parse_manifest(seed("manifest_fuzz", "valid_one_home"), path, bank, "other"); }),
                  "manifest belongs to another model");
}

TEST(RecordParse, InstallRecordSeedsAndNegativeSizes) {
  const std::string path = "/m/sluice-source.json";
  fetch::InstallRecord r = fetch::parse_record(seed("install_record_fuzz", "valid_stream"), path);
  EXPECT_EQ(r.mode, "stream");
  ASSERT_EQ(r.shards.size(), 1u);
  EXPECT_EQ(r.shards[0].tensors.size(), 3u);
  EXPECT_EQ(fetch::parse_record(seed("install_record_fuzz", "valid_full_two_shards"), path).shards.size(), 2u);
  // -1 used to wrap to 2^64 - 1 and pass the size checks.
  EXPECT_CONTAINS(expect_error_of([&] { fetch::parse_record(seed("install_record_fuzz", "bad_negative_size"), path); }),
                  "/m/sluice-source.json: shards[]: shard model-00001-of-00002.safetensors has a negative size");
  EXPECT_CONTAINS(expect_error_of([&] { fetch::parse_record("{\"format\":\"sluice-install\"}\n", path); }), "version");
}

}  // namespace
}  // namespace sluice
