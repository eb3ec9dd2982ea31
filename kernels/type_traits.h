// One table row per ggml tensor type: its name, block geometry, and the
// reference kernels for it (ggml's type_traits, kt's own code). Everything that
// needs to know a type's layout or how to read it dispatches through this table:
// the GGUF reader (sizes), the importer (names), kernels and tests (semantics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kt {

// ggml's type ids as stored in GGUF files. Gaps are ids ggml retired.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20,
  IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Decodes n values (n a multiple of block_size) from src into dst.
using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);
// Dot product of one encoded row of n values with n floats, accumulated in double.
using DotRowFn = double (*)(const void* row, const float* x, int64_t n);

struct TypeTraits {
  GgmlType type;
  std::string_view name;
  int64_t block_size;   // values per block
  size_t type_size;     // bytes per block
  // Null when kt cannot compute with this type: files using it are reported by name.
  DequantRowFn dequant_row;
  DotRowFn dot_row;

  bool supported() const { return dequant_row != nullptr; }
  // Bytes of a row of n values; n must be a multiple of block_size.
  uint64_t row_bytes(int64_t n) const { return uint64_t(n / block_size) * type_size; }
};

// The row for a raw id from a file, or nullptr for an id ggml never defined.
const TypeTraits* find_type(uint32_t id);
// The row for a known type.
const TypeTraits& type_traits(GgmlType t);
std::string_view type_name(GgmlType t);
// Lookup by name ("Q4_K"), for tools and tests; nullptr when unknown.
const TypeTraits* find_type_by_name(std::string_view name);

}  // namespace kt
