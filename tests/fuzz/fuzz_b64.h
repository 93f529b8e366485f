// Base64 for the fuzz targets that build tiktoken rank files ("base64 SPACE rank" lines).
#pragma once
#include <cstdint>
#include <string>

namespace fuzz {

inline std::string b64(const std::string& s) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t w = uint32_t(uint8_t(s[i])) << 16;
    if (i + 1 < s.size()) w |= uint32_t(uint8_t(s[i + 1])) << 8;
    if (i + 2 < s.size()) w |= uint8_t(s[i + 2]);
    out += a[(w >> 18) & 63];
    out += a[(w >> 12) & 63];
    out += i + 1 < s.size() ? a[(w >> 6) & 63] : '=';
    out += i + 2 < s.size() ? a[w & 63] : '=';
  }
  return out;
}

}  // namespace fuzz
