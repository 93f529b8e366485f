// SHA-256 through OpenSSL's EVP interface.
#include "fetch/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/regular_file.h"

namespace sluice::fetch {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) fail("OpenSSL: SHA-256 init failed");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t n) {
  if (EVP_DigestUpdate(ctx_->md, data, n) != 1) fail("OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out, &len) != 1) fail("OpenSSL: SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += digits[out[i] >> 4];
    s += digits[out[i] & 15];
  }
  return s;
}

std::string sha256_file(const std::string& path) {
  std::string why;
  int fd = open_regular(path, O_RDONLY, why);
  if (fd < 0) fail(path, ": cannot open: ", why);
  Sha256 h;
  std::vector<char> buf(4 << 20);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      fail(path, ": read failed: ", std::strerror(err));
    }
    if (r == 0) break;
    h.update(buf.data(), size_t(r));
  }
  ::close(fd);
  return h.hex();
}

}  // namespace sluice::fetch
