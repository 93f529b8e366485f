// Safetensors reader, checkpoint directories and atomic writers: round trips of every dtype,
// sharded checkpoints, and every kind of bad input rejected with a message naming file and field.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "format/safetensors.h"

namespace sluice::format {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sluice-st-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `f`, expecting a sluice::Error; returns its message (empty and a test failure otherwise).
// SHOW_ERRORS=1 prints every message, to review their wording.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (std::getenv("SHOW_ERRORS")) std::fprintf(stderr, "ERR: %s\n", e.what());
    return e.what();
  }
  ADD_FAILURE() << "expected a sluice::Error";
  return "";
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char(uint8_t(v >> (8 * i)));
  return s;
}

// A hand-made safetensors file: length prefix, `header` verbatim, `data_size` zero bytes.
std::string raw_file(const std::string& header, size_t data_size) {
  return le64(header.size()) + header + std::string(data_size, '\0');
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(rng() & 0xff);
  return out;
}

TensorToWrite make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  return {name, dtype, shape, random_bytes(size_t(numel) * size_t(dtype_size(dtype)), seed)};
}

void expect_same(const TensorInfo& got, const TensorToWrite& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.dtype, want.dtype) << want.name;
  EXPECT_EQ(got.shape, want.shape) << want.name;
  ASSERT_EQ(got.nbytes, want.bytes.size()) << want.name;
  if (got.nbytes) {
    EXPECT_EQ(std::memcmp(got.data, want.bytes.data(), got.nbytes), 0) << want.name;
  }
}

// Header of one F32 tensor "w" of shape [2] at data offsets [0, 8].
const char* kOneTensor = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

// --- round trips ---------------------------------------------------------------------------

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir dir;
  const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U8,   DType::BOOL, DType::F8_E4M3};
  std::vector<TensorToWrite> tensors;
  uint32_t seed = 1;
  for (DType t : all) tensors.push_back(make_tensor(cat("t.", dtype_name(t)), t, {3, 5}, seed++));
  tensors.push_back(make_tensor("scalar", DType::F32, {}, seed++));
  tensors.push_back(make_tensor("empty", DType::BF16, {0, 4}, seed++));
  tensors.push_back(make_tensor("odd", DType::U8, {7}, seed++));  // leaves the next tensor unaligned
  tensors.push_back(make_tensor("rank4", DType::F16, {2, 1, 3, 2}, seed++));
  std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "round trip"}});

  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->path(), path);
  ASSERT_EQ(file->tensors().size(), tensors.size());
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "round trip"}}));
  // The reader lists tensors in file order, which is the order they were written in.
  for (size_t i = 0; i < tensors.size(); ++i) {
    expect_same(file->tensors()[i], tensors[i]);
    EXPECT_EQ(file->tensors()[i].file, path);
  }
  // Header is padded to a multiple of 8, so the first tensor starts 8-aligned in the file.
  EXPECT_EQ(file->tensors()[0].file_offset % 8, 0u);
  EXPECT_EQ(file->tensors()[tensors.size() - 4].numel(), 1);  // scalar
  EXPECT_EQ(file->tensors()[tensors.size() - 3].numel(), 0);  // empty

  // The same bytes through the directory reader, and file_offset agrees with the bytes on disk.
  TensorSet set = TensorSet::open_dir(dir.path());
  EXPECT_EQ(set.dir(), dir.path());
  EXPECT_EQ(set.all().size(), tensors.size());
  std::ifstream in(path, std::ios::binary);
  for (const TensorToWrite& t : tensors) {
    const TensorInfo& got = set.get(t.name);
    expect_same(got, t);
    std::vector<char> disk(got.nbytes);
    in.seekg(std::streamoff(got.file_offset));
    in.read(disk.data(), std::streamsize(disk.size()));
    if (got.nbytes) {
      EXPECT_EQ(std::memcmp(disk.data(), t.bytes.data(), got.nbytes), 0) << t.name;
    }
  }
}

TEST(Safetensors, ReadsHandWrittenHeaderWithGapsAndPadding) {
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  // Key order in the JSON differs from data order; a gap between tensors is allowed; trailing
  // spaces pad the header as the format permits.
  std::string header =
      R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})"
      "      ";
  write_bytes(path, raw_file(header, 12));
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "a");
  EXPECT_EQ(file->tensors()[1].name, "b");
  EXPECT_EQ(file->tensors()[1].file_offset, 8 + header.size() + 8);
  EXPECT_TRUE(file->metadata().empty());
}

TEST(Safetensors, EmptyTensorWithHugeDimensions) {
  // numel is 0 although the product of the other dimensions does not fit in 64 bits.
  std::string header =
      R"({"z":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,0],"data_offsets":[0,0]}})";
  auto tensors =
      parse_safetensors_header(reinterpret_cast<const std::byte*>(header.data()), header.size(), 0, "mem");
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].numel(), 0);
  EXPECT_EQ(tensors[0].nbytes, 0u);
}

TEST(Safetensors, ParseHeaderDirectly) {
  std::string header = R"({"__metadata__":{"k":"v"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
  std::map<std::string, std::string> meta;
  auto tensors = parse_safetensors_header(reinterpret_cast<const std::byte*>(header.data()), header.size(), 8,
                                          "mem", &meta);
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].file_offset, 8 + header.size());
  EXPECT_EQ(tensors[0].file, "mem");
  EXPECT_EQ(tensors[0].data, nullptr);
  EXPECT_EQ(meta.at("k"), "v");
  std::string msg = error_of([&] {
    parse_safetensors_header(reinterpret_cast<const std::byte*>(header.data()), header.size(), ~uint64_t(0), "mem");
  });
  EXPECT_NE(msg.find("mem: data region"), std::string::npos) << msg;
}

// --- bad files -----------------------------------------------------------------------------

// Writes `bytes` as a file and returns the message of the error opening it; checks it names the file.
std::string open_error(const TempDir& dir, const std::string& bytes) {
  std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  std::string msg = error_of([&] { SafetensorsFile::open(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
  return msg;
}

TEST(SafetensorsBad, TruncatedFile) {
  TempDir dir;
  EXPECT_NE(open_error(dir, "").find("truncated"), std::string::npos);
  EXPECT_NE(open_error(dir, std::string(5, '\x10')).find("truncated"), std::string::npos);
}

TEST(SafetensorsBad, TruncatedDataRegion) {
  TempDir dir;
  // A shard cut short: the header promises 8 bytes of "w", only 5 remain.
  std::string full = raw_file(kOneTensor, 8);
  std::string msg = open_error(dir, full.substr(0, full.size() - 3));
  EXPECT_NE(msg.find("\"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("data_offsets"), std::string::npos) << msg;
}

TEST(SafetensorsBad, HeaderLengthPastEndOfFile) {
  TempDir dir;
  std::string msg = open_error(dir, le64(1000) + kOneTensor);
  EXPECT_NE(msg.find("header length 1000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
  msg = open_error(dir, le64(~uint64_t(0)) + kOneTensor);
  EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
}

TEST(SafetensorsBad, HeaderLengthAboveLimit) {
  std::string header = kOneTensor;
  std::string msg = error_of([&] {
    parse_safetensors_header(reinterpret_cast<const std::byte*>(header.data()), size_t(200) << 20, 8, "mem");
  });
  EXPECT_NE(msg.find("limit"), std::string::npos) << msg;
}

TEST(SafetensorsBad, InvalidJson) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"F32",)", 8));
  EXPECT_NE(msg.find("invalid JSON at byte"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(std::string("{\"w\"\0", 5), 0));
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
  msg = open_error(dir, raw_file("[1,2]", 0));
  EXPECT_NE(msg.find("expected a JSON object"), std::string::npos) << msg;
  msg = open_error(dir, raw_file("", 0));
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
}

TEST(SafetensorsBad, DuplicateTensorName) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                             R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                             2));
  EXPECT_NE(msg.find("duplicate key \"w\""), std::string::npos) << msg;
}

TEST(SafetensorsBad, UnknownDtype) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown dtype \"F8_E5M2\""), std::string::npos) << msg;
  // A hostile dtype string is cut short in the message.
  std::string long_dtype(5000, 'Q');
  msg = open_error(dir, raw_file(cat(R"({"w":{"dtype":")", long_dtype, R"(","shape":[2],"data_offsets":[0,2]}})"), 2));
  EXPECT_NE(msg.find("(5000 bytes)"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 600u) << msg;
  msg = open_error(dir, raw_file(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_NE(msg.find("dtype: expected a string"), std::string::npos) << msg;
}

TEST(SafetensorsBad, NegativeOrNonIntegerShape) {
  TempDir dir;
  for (const char* shape : {"[-2]", "[2.5]", "[\"2\"]", "[null]", "[2,true]", "2", "{}", "[1e3]"}) {
    std::string msg =
        open_error(dir, raw_file(cat(R"({"w":{"dtype":"U8","shape":)", shape, R"(,"data_offsets":[0,2]}})"), 2));
    EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << shape << ": " << msg;
    EXPECT_NE(msg.find("shape"), std::string::npos) << shape << ": " << msg;
  }
}

TEST(SafetensorsBad, ShapeOverflow) {
  TempDir dir;
  std::string msg = open_error(
      dir, raw_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
}

TEST(SafetensorsBad, MissingOrUnexpectedField) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","data_offsets":[0,2]}})", 2));
  EXPECT_NE(msg.find("shape is missing"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","shape":[2]}})", 2));
  EXPECT_NE(msg.find("data_offsets is missing"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"w":{"shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_NE(msg.find("dtype is missing"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1}})", 2));
  EXPECT_NE(msg.find("unexpected field \"x\""), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"w":[1]})", 2));
  EXPECT_NE(msg.find("tensor \"w\": expected an object"), std::string::npos) << msg;
}

TEST(SafetensorsBad, OffsetsOutsideData) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})", 8));
  EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("past the data region of 8 bytes"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[6,2]}})", 8));
  EXPECT_NE(msg.find("begin is after end"), std::string::npos) << msg;
  for (const char* offsets : {"[0]", "[0,2,4]", "[-1,1]", "[0,2.0]", "\"0,2\""}) {
    msg = open_error(dir, raw_file(cat(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":)", offsets, "}}"), 8));
    EXPECT_NE(msg.find("data_offsets: expected [begin, end]"), std::string::npos) << offsets << ": " << msg;
  }
  msg = open_error(
      dir, raw_file(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[18446744073709551615,18446744073709551617]}})",
                    8));
  EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << msg;
}

TEST(SafetensorsBad, OverlappingTensors) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[3,7]}})",
                                             8));
  EXPECT_NE(msg.find("\"b\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("overlaps tensor \"a\""), std::string::npos) << msg;
  // Fully contained in an earlier, longer tensor, past an intermediate one.
  msg = open_error(dir, raw_file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
                                 R"("c":{"dtype":"U8","shape":[1],"data_offsets":[5,6]}})",
                                 8));
  EXPECT_NE(msg.find("overlaps tensor \"a\""), std::string::npos) << msg;
  // Identical ranges.
  msg = open_error(dir, raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                                 R"("b":{"dtype":"I16","shape":[1],"data_offsets":[2,4]}})",
                                 8));
  EXPECT_NE(msg.find("overlaps"), std::string::npos) << msg;
}

TEST(SafetensorsBad, SizeMismatch) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 8));
  EXPECT_NE(msg.find("tensor \"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("hold 4 bytes but BF16 shape [3] needs 6"), std::string::npos) << msg;
}

TEST(SafetensorsBad, BadMetadata) {
  TempDir dir;
  std::string msg = open_error(dir, raw_file(R"({"__metadata__":{"format":1}})", 0));
  EXPECT_NE(msg.find("__metadata__.\"format\": expected a string"), std::string::npos) << msg;
  msg = open_error(dir, raw_file(R"({"__metadata__":"pt"})", 0));
  EXPECT_NE(msg.find("__metadata__: expected an object"), std::string::npos) << msg;
}

// --- directories ---------------------------------------------------------------------------

// Two shards and the index that maps them, as transformers writes them.
struct ShardedCheckpoint {
  TempDir dir;
  std::vector<TensorToWrite> first, second;
  ShardedCheckpoint() {
    first = {make_tensor("model.embed.weight", DType::BF16, {16, 4}, 1),
             make_tensor("model.layers.0.w", DType::F32, {4, 4}, 2)};
    second = {make_tensor("model.layers.1.w", DType::F32, {4, 4}, 3),
              make_tensor("lm_head.weight", DType::BF16, {16, 4}, 4), make_tensor("scale", DType::U8, {4, 2}, 5)};
    write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
    write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  }
  std::string index(const std::string& extra = "", const std::string& skip = "") const {
    std::string map;
    auto add = [&](const std::vector<TensorToWrite>& ts, const char* shard) {
      for (const auto& t : ts) {
        if (t.name == skip) continue;
        map += cat(map.empty() ? "" : ",", "\"", t.name, "\":\"", shard, "\"");
      }
    };
    add(first, "model-00001-of-00002.safetensors");
    add(second, "model-00002-of-00002.safetensors");
    if (!extra.empty()) map += "," + extra;
    return cat(R"({"metadata":{"total_size":328},"weight_map":{)", map, "}}");
  }
  void write_index(const std::string& text) const { write_bytes(dir.file("model.safetensors.index.json"), text); }
};

TEST(SafetensorsDir, ShardedWithIndex) {
  ShardedCheckpoint ck;
  ck.write_index(ck.index());
  write_bytes(ck.dir.file("stray.safetensors"), "not read: the index decides");
  TensorSet set = TensorSet::open_dir(ck.dir.path());
  EXPECT_EQ(set.all().size(), 5u);
  for (const auto& t : ck.first) {
    expect_same(set.get(t.name), t);
    EXPECT_EQ(set.get(t.name).file, ck.dir.file("model-00001-of-00002.safetensors"));
  }
  for (const auto& t : ck.second) {
    expect_same(set.get(t.name), t);
    EXPECT_EQ(set.get(t.name).file, ck.dir.file("model-00002-of-00002.safetensors"));
  }
  EXPECT_EQ(set.find("nope"), nullptr);
  std::string msg = error_of([&] { set.get("nope"); });
  EXPECT_NE(msg.find("\"nope\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(ck.dir.path()), std::string::npos) << msg;

  // Views stay valid after the set is moved.
  TensorSet moved = std::move(set);
  expect_same(moved.get("lm_head.weight"), ck.second[1]);
}

TEST(SafetensorsDir, IndexListsMissingShard) {
  ShardedCheckpoint ck;
  ck.write_index(ck.index(R"("extra.w":"model-00003-of-00002.safetensors")"));
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00003-of-00002.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"extra.w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

TEST(SafetensorsDir, TensorInIndexMissingFromShard) {
  ShardedCheckpoint ck;
  ck.write_index(ck.index(R"("ghost.w":"model-00002-of-00002.safetensors")"));
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"ghost.w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors which does not contain it"), std::string::npos) << msg;
}

TEST(SafetensorsDir, TensorInShardMissingFromIndex) {
  ShardedCheckpoint ck;
  ck.write_index(ck.index("", "scale"));
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"scale\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("not in the index"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
}

TEST(SafetensorsDir, TensorInWrongShard) {
  ShardedCheckpoint ck;
  std::string text = ck.index();
  std::string from = R"("scale":"model-00002-of-00002.safetensors")";
  text.replace(text.find(from), from.size(), R"("scale":"model-00001-of-00002.safetensors")");
  ck.write_index(text);
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("\"scale\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00001-of-00002.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;
}

TEST(SafetensorsDir, BadIndex) {
  ShardedCheckpoint ck;
  ck.write_index(R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)");
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("model.safetensors.index.json: invalid JSON"), std::string::npos) << msg;
  ck.write_index(R"({"metadata":{}})");
  msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("weight_map: missing"), std::string::npos) << msg;
  ck.write_index(R"({"weight_map":{"a":3}})");
  msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("weight_map.a: expected a shard file name"), std::string::npos) << msg;
  ck.write_index(R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})");
  msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("not a plain file name"), std::string::npos) << msg;
  ck.write_index(R"({"weight_map":{}})");
  msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find("lists no tensors"), std::string::npos) << msg;
}

TEST(SafetensorsDir, BadShardNamedInError) {
  ShardedCheckpoint ck;
  ck.write_index(ck.index());
  std::string shard = ck.dir.file("model-00002-of-00002.safetensors");
  std::filesystem::resize_file(shard, 100);
  std::string msg = error_of([&] { TensorSet::open_dir(ck.dir.path()); });
  EXPECT_NE(msg.find(shard), std::string::npos) << msg;
}

TEST(SafetensorsDir, SortedShardsWithoutIndex) {
  ShardedCheckpoint ck;
  TensorSet set = TensorSet::open_dir(ck.dir.path());
  EXPECT_EQ(set.all().size(), 5u);
  expect_same(set.get("model.layers.1.w"), ck.second[0]);
}

TEST(SafetensorsDir, SingleFilePreferredOverOtherShards) {
  TempDir dir;
  auto t = make_tensor("x", DType::I64, {3}, 9);
  write_safetensors(dir.file("model.safetensors"), {t});
  write_bytes(dir.file("other.safetensors"), "ignored");
  TensorSet set = TensorSet::open_dir(dir.path());
  ASSERT_EQ(set.all().size(), 1u);
  expect_same(set.get("x"), t);
}

TEST(SafetensorsDir, DuplicateNameAcrossShardsRejected) {
  TempDir dir;
  write_safetensors(dir.file("a.safetensors"), {make_tensor("x", DType::U8, {2}, 1)});
  write_safetensors(dir.file("b.safetensors"), {make_tensor("x", DType::U8, {2}, 2)});
  std::string msg = error_of([&] { TensorSet::open_dir(dir.path()); });
  EXPECT_NE(msg.find("\"x\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("a.safetensors")), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("b.safetensors")), std::string::npos) << msg;
}

TEST(SafetensorsDir, NoCheckpoint) {
  TempDir dir;
  std::string msg = error_of([&] { TensorSet::open_dir(dir.path()); });
  EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("no model.safetensors.index.json"), std::string::npos) << msg;
  msg = error_of([&] { TensorSet::open_dir(dir.file("absent")); });
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;
}

// --- writers -------------------------------------------------------------------------------

bool has_temp_files(const TempDir& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

TEST(SafetensorsWrite, InvalidTensorsRejectedBeforeWriting) {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  auto bad = make_tensor("w", DType::F32, {2}, 1);
  bad.bytes.pop_back();
  std::string msg = error_of([&] { write_safetensors(path, {bad}); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"w\""), std::string::npos) << msg;
  auto a = make_tensor("w", DType::U8, {1}, 1);
  msg = error_of([&] { write_safetensors(path, {a, a}); });
  EXPECT_NE(msg.find("written twice"), std::string::npos) << msg;
  msg = error_of([&] { write_safetensors(path, {make_tensor("bad\xff", DType::U8, {1}, 1)}); });
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  TensorToWrite neg{"neg", DType::U8, {-1}, {}};
  msg = error_of([&] { write_safetensors(path, {neg}); });
  EXPECT_NE(msg.find("negative dimension"), std::string::npos) << msg;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWrite, FailedRenameLeavesNoTempFile) {
  TempDir dir;
  // The target is a non-empty directory, so the final rename fails after the data was written.
  std::string path = dir.file("m.safetensors");
  std::filesystem::create_directory(path);
  write_bytes(path + "/keep", "x");
  std::string msg = error_of([&] { write_safetensors(path, {make_tensor("w", DType::F32, {4}, 1)}); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_FALSE(has_temp_files(dir));
  EXPECT_TRUE(std::filesystem::is_directory(path));
  msg = error_of([&] { write_file_durably(path, "text"); });
  EXPECT_FALSE(has_temp_files(dir));
  msg = error_of([&] { write_file_durably(dir.file("no/such/dir/f"), "text"); });
  EXPECT_NE(msg.find("cannot create"), std::string::npos) << msg;
}

TEST(SafetensorsWrite, FailedWriteMidwayKeepsOldFileAndNoTemp) {
  // The death test forks this process, which in a whole-binary run already has the global
  // pool's workers waiting for work (started here, before the file's fsync gives them time to
  // wait, so that a lone run is the same). The child must leave with _Exit: exit() would run
  // ~ThreadPool, whose condition variable still counts the parent's waiting workers, and wait
  // for them forever.
  ThreadPool::global();
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  write_file_durably(path, "old contents");
  // In a child process: cap the file size so the write fails with EFBIG part way through.
  auto child = [&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    bool threw = false;
    try {
      write_safetensors(path, {make_tensor("big", DType::F32, {1 << 16}, 1)});
    } catch (const Error&) {
      threw = true;
    }
    std::_Exit(threw && !has_temp_files(dir) ? 0 : 1);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old contents");
  EXPECT_FALSE(has_temp_files(dir));
}

TEST(SafetensorsWrite, WriteFileAtomicReplaces) {
  TempDir dir;
  std::string path = dir.file("config.json");
  write_file_durably(path, "one");
  write_file_durably(path, "two, longer");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "two, longer");
  EXPECT_FALSE(has_temp_files(dir));
}

}  // namespace
}  // namespace sluice::format
