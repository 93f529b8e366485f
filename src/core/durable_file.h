// Files a crash leaves whole or absent, never half-written (the project's rule for anything it
// writes): the bytes go to a temporary name beside the file (`path.tmp-<pid>`), are fsynced, a
// rename puts them in place, and the directory is fsynced so the rename itself survives a power
// cut. Every writer of models, manifests, homes, states and reports goes through here;
// tests/e2e/crash_kill.sh kills commands at their system calls and checks the rule.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sluice {

// Every byte of data to fd (at the file position, or at `offset`), retrying short writes; fails
// naming `what` (the file) on an error.
void write_all(int fd, const void* data, size_t size, const std::string& what);
void write_all_at(int fd, const void* data, size_t size, uint64_t offset, const std::string& what);
// fsync of a directory, so renames and creations in it are on disk; fails naming it.
void fsync_directory(const std::string& dir);

// A file being written under its temporary name. commit() makes it `path` (fsync, close, rename,
// directory fsync); destroying it uncommitted closes and removes the temporary. For writers that
// keep several files open at once or decide late whether to keep one (write_durably is simpler).
class PendingFile {
 public:
  explicit PendingFile(std::string path, int extra_flags = 0, mode_t mode = 0644);
  // With a temporary name of the writer's choosing (one its cleanup recognises).
  PendingFile(std::string path, std::string tmp, int extra_flags = 0, mode_t mode = 0644);
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  PendingFile(PendingFile&& o) noexcept;
  int fd() const { return fd_; }
  const std::string& tmp() const { return tmp_; }
  const std::string& path() const { return path_; }
  void commit();
  void abandon();  // close and remove the temporary now

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool done_ = false;
};

// `produce(fd, tmp)` fills the temporary file, which then becomes `path`; if produce throws, the
// temporary is removed and the exception passes on.
void write_durably(const std::string& path, const std::function<void(int fd, const std::string& tmp)>& produce);
void write_file_durably(const std::string& path, std::string_view text);

}  // namespace sluice
