// Opening a file inside a home (expert records, markers): the home directory itself may be a
// symlink (a mount point chosen by the user), but nothing below it may be: every component of
// the relative path is opened with O_NOFOLLOW, so an expert file or model folder replaced by a
// symlink is refused by name rather than read from wherever it points. Non-regular files
// (FIFO, device, socket) are refused too (core/regular_file.h).
#pragma once
#include <string>

namespace sluice::store {

// Opens home/rel with `flags` (O_RDONLY, O_WRONLY, optionally O_DIRECT; no O_CREAT). Returns the
// fd, or -1 with `why` naming the component that was refused.
int open_home_file(const std::string& home, const std::string& rel, int flags, std::string& why);
// The same, throwing Error "<home>/<rel>: <why>".
int open_home_file_or_fail(const std::string& home, const std::string& rel, int flags);

}  // namespace sluice::store
