// Component-by-component openat with O_NOFOLLOW below a home.
#include "store/home_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/regular_file.h"

namespace sluice::store {

int open_home_file(const std::string& home, const std::string& rel, int flags, std::string& why) {
  int dir = ::open(home.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    why = cat("home: ", std::strerror(errno));
    return -1;
  }
  size_t start = 0;
  for (size_t slash; (slash = rel.find('/', start)) != std::string::npos; start = slash + 1) {
    const std::string part = rel.substr(start, slash - start);
    if (part.empty()) continue;
    int next = ::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    ::close(dir);
    if (next < 0) {
      // O_NOFOLLOW|O_DIRECTORY on a symlink fails with ELOOP or ENOTDIR depending on the kernel.
      why = err == ELOOP || err == ENOTDIR ? cat(part, " is a symbolic link or not a directory (refused inside a home)")
                                           : cat(part, ": ", std::strerror(err));
      return -1;
    }
    dir = next;
  }
  int fd = open_regular_at(dir, rel.substr(start), flags | O_NOFOLLOW, why);
  ::close(dir);
  return fd;
}

int open_home_file_or_fail(const std::string& home, const std::string& rel, int flags) {
  std::string why;
  int fd = open_home_file(home, rel, flags, why);
  if (fd < 0) fail(home, "/", rel, ": ", why);
  return fd;
}

}  // namespace sluice::store
