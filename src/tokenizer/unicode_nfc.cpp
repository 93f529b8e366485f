// NFC: canonical decomposition (tables + Hangul arithmetic), canonical ordering by combining class,
// then canonical composition of primary composites (UAX #15). Stable characters (class 0, no
// decomposition, never the second of a composition) are skipped without decoding the whole text.
#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_nfc_data.h"
#include "tokenizer/utf8.h"

namespace sluice::tokenizer {
namespace {
using namespace nfc_data;

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(kCombiningClasses, kCombiningClasses + kCombiningClassCount, cp,
                             [](const CombiningClass& c, uint32_t v) { return c.code_point < v; });
  return it != kCombiningClasses + kCombiningClassCount && it->code_point == cp ? it->ccc : 0;
}

const Decomposition* decomposition(uint32_t cp) {
  if (cp < 0xC0) return nullptr;
  auto it = std::lower_bound(kDecompositions, kDecompositions + kDecompositionCount, cp,
                             [](const Decomposition& d, uint32_t v) { return d.code_point < v; });
  return it != kDecompositions + kDecompositionCount && it->code_point == cp ? it : nullptr;
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(kCompositions, kCompositions + kCompositionCount, std::pair<uint32_t, uint32_t>(a, b),
                             [](const Composition& c, std::pair<uint32_t, uint32_t> v) {
                               return c.first != v.first ? c.first < v.first : c.second < v.second;
                             });
  if (it != kCompositions + kCompositionCount && it->first == a && it->second == b) return it->composite;
  return 0;
}

// Code points with class 0 that can still combine with a preceding character.
const std::vector<uint32_t>& zero_class_seconds() {
  static const std::vector<uint32_t> seconds = [] {
    std::vector<uint32_t> v;
    for (size_t i = 0; i < kCompositionCount; ++i)
      if (combining_class(kCompositions[i].second) == 0) v.push_back(kCompositions[i].second);
    for (uint32_t j = kVBase; j < kVBase + kVCount; ++j) v.push_back(j);
    for (uint32_t t = kTBase + 1; t < kTBase + kTCount; ++t) v.push_back(t);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }();
  return seconds;
}

// Primary composites are their own NFC (quick check "Yes") although they have a decomposition.
const std::vector<uint32_t>& composites() {
  static const std::vector<uint32_t> v = [] {
    std::vector<uint32_t> c;
    for (size_t i = 0; i < kCompositionCount; ++i) c.push_back(kCompositions[i].composite);
    std::sort(c.begin(), c.end());
    return c;
  }();
  return v;
}

bool stable(uint32_t cp) {
  if (cp < 0xC0) return true;
  if (combining_class(cp) != 0) return false;
  if (decomposition(cp) != nullptr && !std::binary_search(composites().begin(), composites().end(), cp)) return false;
  if (cp >= kSBase && cp < kSBase + kSCount) return true;  // precomposed Hangul is its own NFC
  const auto& s = zero_class_seconds();
  return !std::binary_search(s.begin(), s.end(), cp);
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const Decomposition* d = decomposition(cp)) {
    out.insert(out.end(), kDecompositionPool + d->offset, kDecompositionPool + d->offset + d->length);
    return;
  }
  out.push_back(cp);
}

}  // namespace

bool nfc_normalize(std::string_view text, std::string& out) {
  // Quick check: find the first unstable code point.
  size_t i = 0;
  bool all_stable = true;
  while (i < text.size()) {
    unsigned char b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len = utf8_sequence_length(text, i);
    if (len == 0) return false;  // callers pass valid UTF-8; be safe
    if (!stable(utf8_decode_at(text, i, len))) {
      all_stable = false;
      break;
    }
    i += len;
  }
  if (all_stable) return false;

  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    size_t len = utf8_sequence_length(text, p);
    decompose(utf8_decode_at(text, p, len), cps);
    p += len;
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t a = 0; a < cps.size();) {
    if (combining_class(cps[a]) == 0) {
      ++a;
      continue;
    }
    size_t b = a;
    while (b < cps.size() && combining_class(cps[b]) != 0) ++b;
    std::stable_sort(cps.begin() + long(a), cps.begin() + long(b),
                     [](uint32_t x, uint32_t y) { return combining_class(x) < combining_class(y); });
    a = b;
  }
  // Canonical composition.
  std::vector<uint32_t> res;
  res.reserve(cps.size());
  long starter = -1;
  int last_class = 0;
  for (uint32_t cp : cps) {
    int cc = combining_class(cp);
    if (starter >= 0) {
      bool blocked = !(last_class < cc || (last_class == 0 && long(res.size()) == starter + 1));
      if (!blocked) {
        if (uint32_t c = compose_pair(res[size_t(starter)], cp)) {
          res[size_t(starter)] = c;
          continue;
        }
      }
    }
    if (cc == 0) starter = long(res.size());
    last_class = cc;
    res.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (uint32_t cp : res) utf8_append(result, cp);
  if (result == text) return false;
  out = std::move(result);
  return true;
}

bool nfc_normalize_bounded(std::string_view text, size_t max_bytes, std::string& out) {
  constexpr size_t kPiece = 64 << 10;
  out.clear();
  std::string piece_nfc;
  for (size_t at = 0; at < text.size();) {
    // The piece runs to the first stable code point at or after at + kPiece.
    size_t end = std::min(text.size(), at + kPiece);
    while (end < text.size()) {
      unsigned char b = static_cast<unsigned char>(text[end]);
      if (b < 0x80) break;
      size_t len = (b & 0xC0) == 0x80 ? 0 : utf8_sequence_length(text, end);
      if (len == 0) {  // inside a sequence (or invalid): step on to the next lead byte
        ++end;
        continue;
      }
      if (stable(utf8_decode_at(text, end, len))) break;
      end += len;
    }
    std::string_view piece = text.substr(at, end - at);
    if (nfc_normalize(piece, piece_nfc))
      out += piece_nfc;
    else
      out.append(piece);
    if (out.size() > max_bytes) return false;
    at = end;
  }
  return true;
}

}  // namespace sluice::tokenizer
