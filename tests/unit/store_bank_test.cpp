// The expert bank as store/ and fetch/ see it: record layout and views, validation of untrusted
// scale bytes (MXFP4 and FP8), the Kimi model identity unchanged from the pre-bank code, and a
// bank fused per layer (one 3-D tensor per layer and segment) served resident, packed by prepare,
// streamed back and located in source shards, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "error_of.h"
#include "core/error.h"
#include "fetch/stream_manifest.h"
#include "fetch/stream_source.h"
#include "format/safetensors.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "store/reader.h"
#include "store/expert_bank.h"
#include "store/manifest.h"
#include "store/prepare.h"
#include "store/resident_experts.h"
#include "store/streaming_experts.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using store::ExpertBank;
using store::ExpertLayout;
using store::ExpertSegment;
using store::ExpertSlot;
using store::SegmentRole;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using testing::error_of;

// Identities computed once with the pre-bank code at commit 85b4594 (store::model_identity over
// ExpertLayout::from_config(model::parse_kimi_config(text))), built in /work/base/build/release,
// for model::tiny_config_json of testing::tiny_k3_spec() (MXFP4 experts) and tiny_linear_spec()
// (BF16 experts). Manifests written by earlier sluice versions are keyed on these strings.
constexpr const char* kTinyK3IdentityAt85b4594 = "3e71d4a07f71af25";
constexpr const char* kTinyLinearIdentityAt85b4594 = "be80786eb60d9544";

TEST(StoreBankTest, KimiModelIdentityIsUnchanged) {
  const std::string k3 = model::tiny_config_json(testing::tiny_k3_spec());
  const ExpertBank b3 = model::expert_bank_from_config(k3, "tiny k3");
  EXPECT_EQ(store::model_identity(k3, b3.layout), kTinyK3IdentityAt85b4594);
  EXPECT_EQ(b3.layout.record_bytes, 3264u);  // also from 85b4594
  EXPECT_EQ(b3.layout.slot_bytes, 4096u);
  const std::string lin = model::tiny_config_json(testing::tiny_linear_spec());
  EXPECT_EQ(store::model_identity(lin, model::expert_bank_from_config(lin, "tiny linear").layout),
            kTinyLinearIdentityAt85b4594);
  // The committed first-format manifest names the identity of its config.
  const std::string fixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/manifest_v1";
  const std::string text = slurp(fixture + "/config.json");
  nlohmann::json m = nlohmann::json::parse(slurp(fixture + "/sluice-manifest.json"));
  EXPECT_EQ(store::model_identity(text, model::expert_bank_from_config(text, "fixture").layout),
            m["model_id"].get<std::string>());
}

TEST(StoreBankTest, KimiBankNamesTheCheckpointTensors) {
  const std::string k3 = model::tiny_config_json(testing::tiny_k3_spec());
  const ExpertBank b = model::expert_bank_from_config(k3, "tiny k3");
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(b.layout.segments.size(), 6u);
  const ExpertSegment& s = b.layout.segments[1];
  EXPECT_EQ(s.key, "w1.weight_scale");
  EXPECT_FALSE(ExpertBank::fused(s));
  EXPECT_EQ(b.tensor_name(s, 3, 7), "language_model.model.layers.3.block_sparse_moe.experts.7.w1.weight_scale");
  EXPECT_EQ(b.offset_in_tensor(s, 7), 0u);
  EXPECT_EQ(b.tensor_shape(s), s.shape);
  std::vector<std::string> names = b.tensor_names();
  EXPECT_EQ(names.size(), b.moe_layers.size() * size_t(b.num_experts) * 6);
  EXPECT_EQ(names.front(), b.tensor_name(b.layout.segments[0], b.moe_layers.front(), 0));
  EXPECT_FALSE(b.is_moe(0));  // the tiny spec's leading dense layer
  EXPECT_TRUE(b.is_moe(b.moe_layers.front()));
}

// A layout of the three matrices in the given types, [rows, cols] for gate and up.
ExpertLayout layout_of(device::WeightType type, int64_t rows, int64_t cols) {
  ExpertLayout l;
  for (ExpertSlot slot : {ExpertSlot::Gate, ExpertSlot::Up, ExpertSlot::Down})
    l.matrices.push_back({slot, type, slot == ExpertSlot::Down ? cols : rows, slot == ExpertSlot::Down ? rows : cols});
  return l;
}

TEST(StoreBankTest, Fp8BlockScalesMustBeFiniteAndPositive) {
  // 130 x 200: edge blocks are partial, so the scales are [2, 2] per matrix.
  ExpertLayout l = layout_of(device::WeightType::FP8_E4M3, 130, 200);
  const std::vector<store::ExpertMatrix> matrices = l.matrices;
  for (const auto& m : matrices) {
    const std::string w = m.slot == ExpertSlot::Gate ? "gate" : m.slot == ExpertSlot::Up ? "up" : "down";
    l.add({.slot = m.slot, .role = SegmentRole::Data, .key = w + ".weight", .dtype = DType::U8,
           .shape = {m.rows, m.cols}, .bytes = uint64_t(m.rows * m.cols), .tensor = "{L}.{E}." + w + ".weight"});
    const int64_t br = (m.rows + 127) / 128, bc = (m.cols + 127) / 128;
    l.add({.slot = m.slot, .role = SegmentRole::Scales, .key = w + ".weight_scale_inv", .dtype = DType::F32,
           .shape = {br, bc}, .bytes = uint64_t(br * bc * 4), .tensor = "{L}.{E}." + w + ".weight_scale_inv"});
  }
  std::vector<std::byte> record(l.slot_bytes);
  std::vector<const std::byte*> seg;
  for (const auto& s : l.segments) {
    seg.push_back(record.data() + s.offset);
    if (s.role != SegmentRole::Scales) continue;
    EXPECT_EQ(s.offset % 4, 0u) << s.key << ": F32 scales sit on a 4-byte boundary";
    for (uint64_t j = 0; j < s.bytes / 4; ++j) {
      const float v = 0.5f + float(j);
      std::memcpy(record.data() + s.offset + j * 4, &v, 4);
    }
  }
  EXPECT_NO_THROW(l.validate(seg, "expert 3 of layer 1"));
  const ExpertSegment& down = l.segments[5];
  ASSERT_EQ(down.key, "down.weight_scale_inv");
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<std::byte> broken = record;
    std::memcpy(broken.data() + down.offset + 4 * 3, &bad, 4);
    std::vector<const std::byte*> bseg;
    for (const auto& s : l.segments) bseg.push_back(broken.data() + s.offset);
    const std::string msg = error_of([&] { l.validate(bseg, "expert 3 of layer 1"); });
    EXPECT_NE(msg.find("expert 3 of layer 1"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("down.weight_scale_inv FP8 block scale"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("at block 3"), std::string::npos) << bad << ": " << msg;
  }
  const device::ExpertView v = l.views(record.data());
  EXPECT_EQ(v.down.type, device::WeightType::FP8_E4M3);
  EXPECT_EQ(v.down.rows, 200);
  EXPECT_EQ(v.down.cols, 130);
  EXPECT_EQ(v.down.scales, record.data() + down.offset);
}

TEST(StoreBankTest, Mxfp4ScaleBytesZeroAnd255AreRefused) {
  const std::string k3 = model::tiny_config_json(testing::tiny_k3_spec());
  const ExpertLayout l = model::expert_bank_from_config(k3, "tiny k3").layout;
  std::vector<std::byte> record(l.slot_bytes, std::byte{127});
  std::vector<const std::byte*> seg;
  for (const auto& s : l.segments) seg.push_back(record.data() + s.offset);
  EXPECT_NO_THROW(l.validate(seg, "x"));
  for (uint8_t bad : {uint8_t(0), uint8_t(255)}) {
    std::vector<std::byte> broken = record;
    broken[l.segments[3].offset + 5] = std::byte{bad};  // w2.weight_scale, element 5
    std::vector<const std::byte*> bseg;
    for (const auto& s : l.segments) bseg.push_back(broken.data() + s.offset);
    const std::string msg = error_of([&] { l.validate(bseg, "expert 2 of layer 4"); });
    EXPECT_NE(msg.find(cat("expert 2 of layer 4: w2.weight_scale E8M0 scale byte ", int(bad), " at element 5")),
              std::string::npos)
        << msg;
  }
}

TEST(StoreBankTest, SegmentsAreCheckedAndAlignedWhenAdded) {
  ExpertLayout l = layout_of(device::WeightType::BF16, 4, 8);
  l.add({.slot = ExpertSlot::Gate, .key = "a", .dtype = DType::U8, .shape = {3}, .bytes = 3, .tensor = "a"});
  l.add({.slot = ExpertSlot::Gate, .role = SegmentRole::Bias, .key = "b", .dtype = DType::F32, .shape = {4}, .bytes = 16,
         .tensor = "b"});
  EXPECT_EQ(l.segments[1].offset, 4u);
  EXPECT_EQ(l.record_bytes, 20u);
  EXPECT_EQ(l.slot_bytes, ExpertLayout::kAlign);
  EXPECT_NE(error_of([&] {
              l.add({.slot = ExpertSlot::Up, .key = "c", .dtype = DType::BF16, .shape = {4, 8}, .bytes = 32, .tensor = "c"});
            }).find("expert segment c: 32 bytes, but BF16 [4, 8] holds 64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              l.add({.slot = ExpertSlot::Up, .key = "a", .dtype = DType::U8, .shape = {1}, .bytes = 1, .tensor = "a2"});
            }).find("key used twice"),
            std::string::npos);
  EXPECT_EQ(l.segments.size(), 2u);
}

// ---- a bank fused per layer ----

constexpr int64_t kExperts = 5, kInter = 16, kInput = 64;

// Layers 1 and 2 of 3 are MoE. Gate is MXFP4 (packed, scales), up BF16, down BF16 with an F32
// bias; every segment is one tensor per layer, experts along dim 0.
ExpertBank fused_bank() {
  ExpertBank b;
  b.num_layers = 3;
  b.num_experts = kExperts;
  b.moe_layers = {1, 2};
  b.layout.matrices = {{ExpertSlot::Gate, device::WeightType::MXFP4, kInter, kInput},
                       {ExpertSlot::Up, device::WeightType::BF16, kInter, kInput},
                       {ExpertSlot::Down, device::WeightType::BF16, kInput, kInter}};
  const std::string p = "model.layers.{L}.mlp.experts.";
  b.layout.add({.slot = ExpertSlot::Gate, .role = SegmentRole::Data, .key = "gate.blocks", .dtype = DType::U8,
                .shape = {kInter, kInput / 2}, .bytes = uint64_t(kInter * kInput / 2), .tensor = p + "gate_blocks"});
  b.layout.add({.slot = ExpertSlot::Gate, .role = SegmentRole::Scales, .key = "gate.scales", .dtype = DType::U8,
                .shape = {kInter, kInput / 32}, .bytes = uint64_t(kInter * kInput / 32), .tensor = p + "gate_scales"});
  b.layout.add({.slot = ExpertSlot::Up, .role = SegmentRole::Data, .key = "up", .dtype = DType::BF16,
                .shape = {kInter, kInput}, .bytes = uint64_t(kInter * kInput * 2), .tensor = p + "up_proj"});
  b.layout.add({.slot = ExpertSlot::Down, .role = SegmentRole::Data, .key = "down", .dtype = DType::BF16,
                .shape = {kInput, kInter}, .bytes = uint64_t(kInput * kInter * 2), .tensor = p + "down_proj"});
  b.layout.add({.slot = ExpertSlot::Down, .role = SegmentRole::Bias, .key = "down.bias", .dtype = DType::F32,
                .shape = {kInput}, .bytes = uint64_t(kInput * 4), .tensor = p + "down_proj_bias"});
  return b;
}

// A checkpoint of the fused bank: random bytes (valid E8M0 scales), plus a dense tensor so that
// the file also holds something that is not an expert.
class StoreFusedBankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(model_dir());
    write_file_durably(model_dir() + "/config.json", "{\"model_type\": \"fused_test\", \"num_hidden_layers\": 3}\n");
    std::mt19937 rng(2026);
    std::vector<format::TensorToWrite> out;
    out.push_back({"model.embed_tokens.weight", DType::F32, {4, 4}, std::vector<std::byte>(64, std::byte{1})});
    for (int l : bank_.moe_layers)
      for (const ExpertSegment& s : bank_.layout.segments) {
        format::TensorToWrite t{bank_.tensor_name(s, l, 0), s.dtype, bank_.tensor_shape(s), {}};
        t.bytes.resize(size_t(s.bytes * kExperts));
        for (auto& byte : t.bytes)
          byte = std::byte(s.role == SegmentRole::Scales ? 1 + rng() % 254 : rng() % 256);
        out.push_back(std::move(t));
      }
    for (size_t i = 1; i < out.size(); ++i) tensors_[out[i].name] = out[i].bytes;
    format::write_safetensors(model_dir() + "/model.safetensors", out);
  }
  std::string model_dir() const { return dir_ / "model"; }
  // The bytes segment `s` of (layer, expert) must hold: its expert's slice of the written tensor
  // (experts along dim 0, as SetUp wrote them; not computed by the bank under test).
  std::vector<std::byte> expected(const ExpertSegment& s, int layer, int expert) const {
    const auto& t = tensors_.at(cat("model.layers.", layer, ".mlp.experts.", s.tensor.substr(s.tensor.rfind('.') + 1)));
    auto begin = t.begin() + std::ptrdiff_t(uint64_t(expert) * s.bytes);
    return std::vector<std::byte>(begin, begin + std::ptrdiff_t(s.bytes));
  }
  std::vector<std::byte> expected_record(int layer, int expert) const {
    std::vector<std::byte> r(bank_.layout.slot_bytes, std::byte{0});
    for (const ExpertSegment& s : bank_.layout.segments) {
      auto e = expected(s, layer, expert);
      std::memcpy(r.data() + s.offset, e.data(), e.size());
    }
    return r;
  }
  // Each view's data, scales and bias equal the expected segment bytes; formats come from the bank.
  void expect_view(const device::ExpertView& v, int layer, int expert) const {
    const auto& L = bank_.layout;
    auto same = [&](const void* p, size_t seg) {
      auto e = expected(L.segments[seg], layer, expert);
      return p && std::memcmp(p, e.data(), e.size()) == 0;
    };
    EXPECT_EQ(v.gate.type, device::WeightType::MXFP4);
    EXPECT_EQ(v.gate.rows, kInter);
    EXPECT_EQ(v.gate.cols, kInput);
    EXPECT_TRUE(same(v.gate.data, 0)) << "gate data of expert " << expert << " of layer " << layer;
    EXPECT_TRUE(same(v.gate.scales, 1)) << "gate scales of expert " << expert << " of layer " << layer;
    EXPECT_EQ(v.gate.bias, nullptr);
    EXPECT_EQ(v.up.type, device::WeightType::BF16);
    EXPECT_TRUE(same(v.up.data, 2)) << "up of expert " << expert << " of layer " << layer;
    EXPECT_EQ(v.up.scales, nullptr);
    EXPECT_EQ(v.down.type, device::WeightType::BF16);
    EXPECT_EQ(v.down.rows, kInput);
    EXPECT_EQ(v.down.cols, kInter);
    EXPECT_TRUE(same(v.down.data, 3)) << "down of expert " << expert << " of layer " << layer;
    EXPECT_TRUE(same(v.down.bias, 4)) << "down bias of expert " << expert << " of layer " << layer;
    EXPECT_EQ(v.down.bias_type, DType::F32);
  }
  // Every expert of every MoE layer through `p`, in groups of at most max_batch.
  std::map<std::pair<int, int>, device::ExpertView> all_views(store::ExpertProvider& p, bool check_now) {
    std::map<std::pair<int, int>, device::ExpertView> got;
    for (int l : bank_.moe_layers) {
      std::vector<int32_t> ids;
      for (int e = 0; e < kExperts; ++e) ids.push_back(e);
      for (size_t g = 0; g < ids.size(); g += p.max_batch()) {
        const size_t n = std::min(p.max_batch(), ids.size() - g);
        p.begin(l, std::span<const int32_t>(ids.data() + g, n));
        device::ExpertView v;
        for (int i; (i = p.next_ready(&v)) >= 0;) {
          if (check_now) expect_view(v, l, ids[g + size_t(i)]);
          got[{l, ids[g + size_t(i)]}] = v;
        }
        p.release(l);
      }
    }
    return got;
  }
  testing::TempDir dir_{"fused-bank"};
  ExpertBank bank_ = fused_bank();
  std::map<std::string, std::vector<std::byte>> tensors_;
};

TEST_F(StoreFusedBankTest, NamesOffsetsAndShapesOfFusedTensors) {
  const ExpertSegment& down = bank_.layout.segments[3];
  EXPECT_TRUE(ExpertBank::fused(down));
  EXPECT_EQ(bank_.tensor_name(down, 2, 4), "model.layers.2.mlp.experts.down_proj");
  EXPECT_EQ(bank_.offset_in_tensor(down, 4), 4 * down.bytes);
  EXPECT_EQ(bank_.tensor_shape(down), (std::vector<int64_t>{kExperts, kInput, kInter}));
  // One name per layer and segment, not per expert.
  std::vector<std::string> names = bank_.tensor_names();
  EXPECT_EQ(names.size(), 2u * bank_.layout.segments.size());
  EXPECT_EQ(names.front(), "model.layers.1.mlp.experts.gate_blocks");
  EXPECT_EQ(bank_.total_record_bytes(), 2u * kExperts * bank_.layout.record_bytes);
}

TEST_F(StoreFusedBankTest, ResidentPreparedAndStreamedViewsAreBitIdentical) {
  format::TensorSet ts = format::TensorSet::open_dir(model_dir());
  store::ResidentExperts resident(bank_, ts);
  auto res = all_views(resident, /*check_now=*/true);
  EXPECT_EQ(res.size(), size_t(2 * kExperts));

  store::PrepareOptions po;
  po.homes = {store::parse_home_spec(dir_ / "h0"), store::parse_home_spec(dir_ / "h1")};
  po.measure = false;
  store::Manifest m = store::prepare_experts(model_dir(), bank_, po);
  const std::string id = store::model_identity(slurp(model_dir() + "/config.json"), bank_.layout);
  EXPECT_EQ(m.model_id, id);
  EXPECT_EQ(m.num_layers, 3);
  EXPECT_TRUE(m.holders[0].empty());
  // Every packed record is the expert's segments in layout order, zero padded to the slot.
  for (int l : bank_.moe_layers)
    for (int e = 0; e < kExperts; ++e)
      for (const store::Holder& h : m.of(l, e)) {
        std::string file = slurp(m.homes[size_t(h.home)].path + "/" + h.file);
        ASSERT_GE(file.size(), h.offset + h.length);
        auto want = expected_record(l, e);
        EXPECT_EQ(std::memcmp(file.data() + h.offset, want.data(), want.size()), 0) << "layer " << l << " expert " << e;
      }
  store::Manifest again = store::read_manifest(store::manifest_path(model_dir()), bank_, id);
  EXPECT_EQ(again.layout.slot_bytes, bank_.layout.slot_bytes);

  store::StreamOptions so;
  so.cache_bytes = 4 * bank_.layout.slot_bytes;  // fewer slots than a layer's experts: evictions
  so.prefetch = false;
  store::StreamingExperts streamed(again, so);
  // Views are only valid until release: each is checked while its lease is open.
  all_views(streamed, /*check_now=*/true);
  EXPECT_EQ(streamed.counters().misses, uint64_t(2 * kExperts));
}

TEST_F(StoreFusedBankTest, SourceShardsAreLocatedPerExpertSlice) {
  const std::string path = model_dir() + "/model.safetensors";
  auto file = format::SafetensorsFile::open(path);
  fetch::InstallRecord rec;
  fetch::SourceShard shard;
  shard.name = "model.safetensors";
  shard.tensors = file->tensors();
  rec.shards.push_back(shard);
  EXPECT_NO_THROW(fetch::check_source_experts(rec, bank_));
  fetch::ExpertLocator loc(rec, bank_);
  const std::string bytes = slurp(path);
  for (int l : bank_.moe_layers)
    for (int e = 0; e < kExperts; ++e) {
      auto pieces = loc.pieces(l, e);
      ASSERT_EQ(pieces.size(), bank_.layout.segments.size());
      for (size_t i = 0; i < pieces.size(); ++i) {
        auto want = expected(bank_.layout.segments[i], l, e);
        ASSERT_EQ(pieces[i].bytes, want.size());
        EXPECT_EQ(std::memcmp(bytes.data() + pieces[i].offset, want.data(), want.size()), 0)
            << "segment " << i << " of expert " << e << " of layer " << l;
      }
    }
  // A fused tensor of the right size but another shape is refused, naming it.
  for (auto& t : rec.shards[0].tensors)
    if (t.name == "model.layers.2.mlp.experts.up_proj") t.shape = {kInter, kExperts, kInput};
  fetch::ExpertLocator wrong(rec, bank_);
  EXPECT_NE(error_of([&] { wrong.pieces(2, 0); }).find("model.layers.2.mlp.experts.up_proj has shape [16, 5, 64]"),
            std::string::npos);
}

TEST_F(StoreFusedBankTest, FusedTensorOfAnotherShapeIsRefusedNamingIt) {
  ExpertBank other = bank_;
  other.num_experts = kExperts + 1;  // the checkpoint's tensors hold 5 experts, not 6
  format::TensorSet ts = format::TensorSet::open_dir(model_dir());
  const std::string msg = error_of([&] { store::ResidentExperts r(other, ts); });
  EXPECT_NE(msg.find("tensor model.layers.1.mlp.experts.gate_blocks is U8 with 3 dims; the config implies U8 [6, 16, 32]"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// A home's read latencies stay bounded however long the reader runs (a server's telemetry copies
// them every second): the mean covers every read, the p99 the most recent window.
TEST(StoreHomeStats, LatenciesAreABoundedWindowWithAnExactMean) {
  store::HomeStats s;
  const size_t n = 3 * store::HomeStats::kLatencyWindow + 17;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const float ms = i < n - store::HomeStats::kLatencyWindow ? 1000.0f : float(i % 100);
    s.reads += 1;
    s.add_latency(ms);
    sum += ms;
  }
  EXPECT_EQ(s.latency_ms.size(), store::HomeStats::kLatencyWindow);
  EXPECT_DOUBLE_EQ(s.mean_ms(), sum / double(n));
  EXPECT_LT(s.p99_ms(), 100.0);  // the old 1000 ms reads have left the window
  EXPECT_GE(s.p99_ms(), 98.0);
}

}  // namespace
}  // namespace sluice
