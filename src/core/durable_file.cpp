// The durable writes of durable_file.h.
#include "core/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace sluice {

namespace {

// Writes size bytes from data through `put(p, n, done)` (one write(2)-like call of at most n bytes,
// `done` bytes in), retrying interrupted and short writes; fails naming `what`.
template <typename Put>
void write_every_byte(const void* data, size_t size, const std::string& what, Put put) {
  const char* p = static_cast<const char*>(data);
  for (uint64_t done = 0; size > 0;) {
    const ssize_t n = put(p, std::min<size_t>(size, size_t(1) << 30), done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(what, ": write failed: ", std::strerror(errno));
    }
    if (n == 0) fail(what, ": write wrote nothing");
    p += n;
    done += uint64_t(n);
    size -= size_t(n);
  }
}

}  // namespace

void write_all(int fd, const void* data, size_t size, const std::string& what) {
  write_every_byte(data, size, what, [fd](const char* p, size_t n, uint64_t) { return ::write(fd, p, n); });
}

void write_all_at(int fd, const void* data, size_t size, uint64_t offset, const std::string& what) {
  write_every_byte(data, size, what,
                   [fd, offset](const char* p, size_t n, uint64_t done) { return ::pwrite(fd, p, n, off_t(offset + done)); });
}

void fsync_directory(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(d, ": cannot open the directory to fsync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(d, ": fsync of the directory failed: ", std::strerror(err));
}

PendingFile::PendingFile(std::string path, int extra_flags, mode_t mode)
    : PendingFile(path, cat(path, ".tmp-", ::getpid()), extra_flags, mode) {}

PendingFile::PendingFile(std::string path, std::string tmp, int extra_flags, mode_t mode)
    : path_(std::move(path)), tmp_(std::move(tmp)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, mode);
  if (fd_ < 0) fail(tmp_, ": cannot create: ", std::strerror(errno));
}

PendingFile::PendingFile(PendingFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(std::exchange(o.fd_, -1)), done_(std::exchange(o.done_, true)) {}

PendingFile::~PendingFile() {
  if (!done_) abandon();
}

void PendingFile::abandon() {
  if (done_) return;
  done_ = true;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void PendingFile::commit() {
  if (done_) fail(path_, ": committed twice");
  if (::fsync(fd_) != 0) fail(tmp_, ": fsync failed: ", std::strerror(errno));
  const int rc = ::close(std::exchange(fd_, -1));
  if (rc != 0) fail(tmp_, ": close failed: ", std::strerror(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(path_, ": cannot rename ", tmp_, " into place: ", std::strerror(errno));
  done_ = true;
  // The rename is durable only once the directory entry is on disk.
  fsync_directory(std::filesystem::path(path_).parent_path().string());
}

void write_durably(const std::string& path, const std::function<void(int fd, const std::string& tmp)>& produce) {
  PendingFile f(path);
  produce(f.fd(), f.tmp());
  f.commit();
}

void write_file_durably(const std::string& path, std::string_view text) {
  write_durably(path, [&](int fd, const std::string& tmp) { write_all(fd, text.data(), text.size(), tmp); });
}

}  // namespace sluice
