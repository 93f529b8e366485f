// SHA-256 (OpenSSL's libcrypto): incremental hashing and whole files, as lower-case hex.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace sluice::fetch {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void update(const void* data, size_t n);
  std::string hex();  // finishes the hash

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256_file(const std::string& path);

}  // namespace sluice::fetch
