// Opening files for reading that must be regular files (model files, shards, manifests, expert
// records). A FIFO, device, socket or directory put in a file's place is refused by name instead
// of blocking forever in open() or read(): files are opened with O_NONBLOCK and checked with fstat.
#pragma once
#include <string>

namespace sluice {

// What a stat mode is, in words ("a FIFO", "a directory", ...), for errors.
const char* file_kind(unsigned mode);

// Opens `path` with `flags` (O_RDONLY plus e.g. O_DIRECT; O_CLOEXEC is added) and returns the fd,
// in blocking mode, of a regular file. On failure returns -1 and sets `why` (errno's text, or
// "is a FIFO, not a regular file"); symlinks are followed unless flags has O_NOFOLLOW.
int open_regular(const std::string& path, int flags, std::string& why);
// The same, throwing Error "<path>: <why>".
int open_regular_or_fail(const std::string& path, int flags);
// As open_regular, relative to the directory fd `dir` (openat).
int open_regular_at(int dir, const std::string& name, int flags, std::string& why);

// Throws "<path>: is a FIFO, not a regular file" when `path` exists and is not a regular file
// (following symlinks); a missing path passes (the caller reports it as it always has). For
// callers that then open the file by name with code that cannot fstat it.
void require_regular_if_exists(const std::string& path);

// Applies require_regular_if_exists to every entry of directory `dir` that sluice may read by name
// (names ending in .json, .safetensors, .model, .tiktoken, .txt or .jinja: configs, shards, indexes,
// tokenizers, sluice's records). Called before a model directory is loaded, so that a FIFO in a
// shard's place is refused by name by code that opens files without open_regular.
void require_regular_model_files(const std::string& dir);

// The whole contents of a regular file; throws naming the path.
std::string read_regular_file(const std::string& path);

}  // namespace sluice
