// An LD_PRELOAD library that counts every call of the process to the C allocator (malloc, calloc,
// realloc, posix_memalign, aligned_alloc, memalign: operator new and every library's allocations go
// through them) and writes the count to the file SLUICE_ALLOC_COUNT_FILE names when the process
// exits. tests/e2e/run_allocations.sh runs `sluice run` under it twice, for a short and a long
// generation: the difference is what the generation loop allocates per token.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<unsigned long> g_calls{0};
void count() { g_calls.fetch_add(1, std::memory_order_relaxed); }

struct Report {
  ~Report() {
    const char* path = std::getenv("SLUICE_ALLOC_COUNT_FILE");
    if (!path || !*path) return;
    char line[32];
    const int n = std::snprintf(line, sizeof line, "%lu\n", g_calls.load());
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (::write(fd, line, size_t(n)) != n) ::unlink(path);
    ::close(fd);
  }
} g_report;
}  // namespace

extern "C" {
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  count();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
int posix_memalign(void** p, size_t align, size_t n) {
  count();
  *p = __libc_memalign(align, n);
  return *p ? 0 : 12;  // ENOMEM
}
void* aligned_alloc(size_t align, size_t n) {
  count();
  return __libc_memalign(align, n);
}
void* memalign(size_t align, size_t n) {
  count();
  return __libc_memalign(align, n);
}
}
