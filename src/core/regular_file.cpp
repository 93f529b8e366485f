// Non-blocking open + fstat, so that a non-regular file in a regular file's place is an error.
#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/error.h"

namespace sluice {

const char* file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

int open_regular_at(int dir, const std::string& name, int flags, std::string& why) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int fd = ::openat(dir, name.c_str(), flags | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == EINVAL && (flags & O_DIRECT))  // filesystems without O_DIRECT
    fd = ::openat(dir, name.c_str(), (flags & ~O_DIRECT) | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP && (flags & O_NOFOLLOW) ? "is a symbolic link (refused here)" : std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = cat("is ", file_kind(st.st_mode), ", not a regular file");
    ::close(fd);
    return -1;
  }
  // Back to blocking reads (O_NONBLOCK means nothing for regular files, but keep the fd plain).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int open_regular(const std::string& path, int flags, std::string& why) {
  return open_regular_at(AT_FDCWD, path, flags, why);
}

int open_regular_or_fail(const std::string& path, int flags) {
  std::string why;
  int fd = open_regular(path, flags, why);
  if (fd < 0) fail(path, ": ", why);
  return fd;
}

void require_regular_if_exists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode)) fail(path, ": is ", file_kind(st.st_mode), ", not a regular file");
}

void require_regular_model_files(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return;  // not a directory: the loader names that
  static const char* const kSuffixes[] = {".json", ".safetensors", ".model", ".tiktoken", ".txt", ".jinja"};
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    for (const char* suffix : kSuffixes) {
      const std::string_view sv(suffix);
      if (name.size() >= sv.size() && name.compare(name.size() - sv.size(), sv.size(), sv) == 0) {
        require_regular_if_exists(it->path().string());
        break;
      }
    }
  }
}

std::string read_regular_file(const std::string& path) {
  int fd = open_regular_or_fail(path, O_RDONLY);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      fail(path, ": read failed: ", std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

}  // namespace sluice
