// The byte framing of a state: head (model type, length, buffer count) and buffers (shape, rows),
// moved through the device in chunks of at most kChunkBytes of host memory.
#include "model/state_io.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace sluice::model {
namespace {

constexpr uint64_t kChunkBytes = uint64_t(8) << 20;
constexpr uint64_t kMaxTypeBytes = 64;

void put_u64(StateSink& out, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
  out.write(b, sizeof b);
}

uint64_t get_u64(StateSource& in) {
  uint8_t b[8];
  in.read(b, sizeof b);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(b[i]) << (8 * i);
  return v;
}

// Rows per chunk of a buffer of `cols` columns (at least one row).
int64_t chunk_rows(int64_t cols) { return std::max<int64_t>(1, int64_t(kChunkBytes / 4) / std::max<int64_t>(1, cols)); }

}  // namespace

void BytesSink::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  bytes.insert(bytes.end(), p, p + n);
}

void BytesSource::read(void* data, size_t n) {
  if (n > bytes_.size() - at_) fail("state bytes end early: ", n, " more wanted at offset ", at_, " of ", bytes_.size());
  std::memcpy(data, bytes_.data() + at_, n);
  at_ += n;
}

void StateWriter::head(const std::string& model_type, int64_t length, int64_t buffers) {
  SLUICE_CHECK(model_type.size() <= kMaxTypeBytes, "model type '", model_type, "' too long for a state");
  put_u64(out_, model_type.size());
  out_.write(model_type.data(), model_type.size());
  put_u64(out_, uint64_t(length));
  put_u64(out_, uint64_t(buffers));
}

void StateWriter::rows(const device::Buf& b) {
  put_u64(out_, uint64_t(b.rows));
  put_u64(out_, uint64_t(b.cols));
  if (b.size() == 0) return;
  const int64_t step = chunk_rows(b.cols);
  chunk_.resize(size_t(std::min(step, b.rows) * b.cols));
  for (int64_t r = 0; r < b.rows; r += step) {
    const int64_t n = std::min(step, b.rows - r);
    dev_.download(b.rows_view(r, n), chunk_.data());
    out_.write(chunk_.data(), size_t(n * b.cols) * 4);
  }
}

int64_t StateReader::head(const std::string& model_type, int64_t buffers, uint64_t fixed_floats,
                          uint64_t floats_per_position) {
  const uint64_t type_bytes = get_u64(in_);
  if (type_bytes > kMaxTypeBytes) fail("state: a model type of ", type_bytes, " bytes (at most ", kMaxTypeBytes, ")");
  std::string type(type_bytes, '\0');
  in_.read(type.data(), type.size());
  if (type != model_type) fail("state of a ", type, " model, not ", model_type);
  const uint64_t length = get_u64(in_), count = get_u64(in_);
  if (count != uint64_t(buffers)) fail("state with ", count, " buffers; a ", model_type, " state has ", buffers);
  // Exactly the buffers' shapes and values remain: checked before anything is sized by `length`.
  const uint64_t left = in_.remaining(), shapes = 16 * uint64_t(buffers);
  if (left < shapes + 4 * fixed_floats) fail("state: ", left, " bytes left after its head, too few for its buffers");
  const uint64_t per_position = 4 * floats_per_position, rest = left - shapes - 4 * fixed_floats;
  const bool fits = per_position == 0 ? rest == 0 : length <= rest / per_position && length * per_position == rest;
  if (!fits || length > uint64_t(INT64_MAX))
    fail("state of length ", length, " does not match the ", left, " bytes after its head");
  return int64_t(length);
}

void StateReader::rows(device::Buf b, const char* what) {
  const uint64_t rows = get_u64(in_), cols = get_u64(in_);
  if (rows != uint64_t(b.rows) || cols != uint64_t(b.cols))
    fail("state: ", what, " is [", rows, ", ", cols, "], expected [", b.rows, ", ", b.cols, "]");
  if (b.size() == 0) return;
  const int64_t step = chunk_rows(b.cols);
  chunk_.resize(size_t(std::min(step, b.rows) * b.cols));
  for (int64_t r = 0; r < b.rows; r += step) {
    const int64_t n = std::min(step, b.rows - r);
    in_.read(chunk_.data(), size_t(n * b.cols) * 4);
    dev_.upload(b.rows_view(r, n), chunk_.data());
    dev_.finish();  // the chunk is refilled next: the upload must have taken it
  }
}

}  // namespace sluice::model
