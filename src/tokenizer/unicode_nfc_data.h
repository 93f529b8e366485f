// Declarations of the generated Unicode tables behind the NFC normaliser (unicode_nfc_data.cpp is
// produced by tools/tokenizer/gen_unicode_nfc.py). All arrays are sorted by their first field.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sluice::tokenizer::nfc_data {

struct CombiningClass {
  uint32_t code_point;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t code_point;
  uint32_t offset;  // into kDecompositionPool
  uint32_t length;
};
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const char* const kUnicodeVersion;
extern const CombiningClass kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const uint32_t kDecompositionPool[];
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

}  // namespace sluice::tokenizer::nfc_data
