// A sequence state as bytes: the sink and source a Target writes a state to and reads it from
// (Target::write_state / read_state), and the framing every architecture shares: the model type,
// the length, then each device buffer as its shape and its rows, downloaded and uploaded in chunks
// through the device (so the same bytes come out of and go back into a CPU or a GPU state).
// Reading checks every shape against the state it fills and throws naming what differs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "device/device.h"

namespace sluice::model {

class StateSink {
 public:
  virtual ~StateSink() = default;
  virtual void write(const void* data, size_t bytes) = 0;
};

// Throws sluice::Error when fewer bytes remain than asked for.
class StateSource {
 public:
  virtual ~StateSource() = default;
  virtual void read(void* data, size_t bytes) = 0;
  // Bytes left to read: a state's bytes end exactly where its source does.
  virtual uint64_t remaining() const = 0;
};

// Sinks and sources in memory (tests; small states).
class BytesSink final : public StateSink {
 public:
  void write(const void* data, size_t bytes) override;
  std::vector<uint8_t> bytes;
};
class BytesSource final : public StateSource {
 public:
  explicit BytesSource(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  void read(void* data, size_t bytes) override;
  uint64_t remaining() const override { return bytes_.size() - at_; }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

// Writes the framing's head (model type, length, buffer count) and the buffers in order.
class StateWriter {
 public:
  StateWriter(device::Device& d, StateSink& out) : dev_(d), out_(out) {}
  void head(const std::string& model_type, int64_t length, int64_t buffers);
  void rows(const device::Buf& b);  // its shape, then its rows (host-dense, little-endian fp32)

 private:
  device::Device& dev_;
  StateSink& out_;
  std::vector<float> chunk_;
};

class StateReader {
 public:
  StateReader(device::Device& d, StateSource& in) : dev_(d), in_(in) {}
  // Checks the model type and the buffer count, and that exactly the bytes of `buffers` buffers of
  // fixed_floats + length * floats_per_position values in all remain (so nothing is allocated for
  // a length the bytes cannot hold); returns the length.
  int64_t head(const std::string& model_type, int64_t buffers, uint64_t fixed_floats, uint64_t floats_per_position);
  // Reads a buffer of exactly b's shape into b (what must be `what` in messages).
  void rows(device::Buf b, const char* what);

 private:
  device::Device& dev_;
  StateSource& in_;
  std::vector<float> chunk_;
};

}  // namespace sluice::model
