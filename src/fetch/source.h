// A model source: a Hugging Face-style repository over HTTP(S) (libcurl, Range requests) or a
// local directory with the same layout. Every read is checked for its exact length; transient
// HTTP failures are retried from the byte where they stopped.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace sluice::fetch {

struct RemoteFile {
  bool found = false;
  uint64_t size = 0;
  std::string sha256;  // lower-case hex when the source states one (ETag of LFS files), else empty
};

struct SourceOptions {
  int retries = 4;              // extra attempts after a transient failure (dropped connection, 5xx)
  double retry_delay_s = 0.5;   // doubled after each failed attempt
  long connect_timeout_s = 20;
  long stall_timeout_s = 60;    // abort a transfer that moves under 1 KB/s this long
};

class Source {
 public:
  virtual ~Source() = default;
  // URL or path of `name` inside the source, for messages.
  virtual std::string where(const std::string& name) const = 0;
  // Size (and checksum, if stated) of `name`; found = false when the source says it does not
  // exist (HTTP 404, no such file). Any other failure throws naming the URL.
  virtual RemoteFile stat(const std::string& name) = 0;
  // Delivers exactly the bytes [begin, end) of `name` to `sink` in order, in pieces. On a retry
  // the transfer continues where the sink stopped, so the sink never sees a byte twice.
  virtual void read(const std::string& name, uint64_t begin, uint64_t end,
                    const std::function<void(const std::byte*, size_t)>& sink) = 0;
  // read() into a buffer of end - begin bytes.
  void read_into(const std::string& name, uint64_t begin, uint64_t end, std::byte* dst);
  // Whole small file (config, index, tokenizer) as text; throws if missing.
  std::string read_text(const std::string& name, uint64_t max_bytes = 64ull << 20);
  // The source as given by the user (URL or directory).
  virtual const std::string& root() const = 0;
};

// "http://", "https://" -> HTTP source (a huggingface.co repository URL without /resolve/ gets
// /resolve/main appended; HF_TOKEN is sent as a bearer token when set); anything else is a directory.
std::unique_ptr<Source> open_source(const std::string& url_or_dir, const SourceOptions& opt = {});

}  // namespace sluice::fetch
