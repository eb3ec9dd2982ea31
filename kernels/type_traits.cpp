#include "kernels/type_traits.h"
#include "kernels/vec_dot_block.h"

#include <array>
#include <cstdlib>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/quant_ref.h"

namespace kt {
namespace {

using namespace kt::cpu;

// Geometry from ggml (ggml-common.h): block sizes and bytes per block. Types kt
// has no kernels for still get their true sizes, so a file using them is
// reported by name ("IQ2_XXS is not supported") instead of being misread.
constexpr TypeTraits kTable[] = {
    {GgmlType::F32, "F32", 1, 4, dequant_row_f32, dot_row_f32},
    {GgmlType::F16, "F16", 1, 2, dequant_row_f16, dot_row_f16},
    {GgmlType::Q4_0, "Q4_0", 32, 18, dequant_row_q4_0, dot_row_q4_0},
    {GgmlType::Q4_1, "Q4_1", 32, 20, dequant_row_q4_1, dot_row_q4_1},
    {GgmlType::Q5_0, "Q5_0", 32, 22, dequant_row_q5_0, dot_row_q5_0},
    {GgmlType::Q5_1, "Q5_1", 32, 24, dequant_row_q5_1, dot_row_q5_1},
    {GgmlType::Q8_0, "Q8_0", 32, 34, dequant_row_q8_0, dot_row_q8_0},
    {GgmlType::Q8_1, "Q8_1", 32, 36, nullptr, nullptr},
    {GgmlType::Q2_K, "Q2_K", 256, 84, dequant_row_q2_k, dot_row_q2_k},
    {GgmlType::Q3_K, "Q3_K", 256, 110, dequant_row_q3_k, dot_row_q3_k},
    {GgmlType::Q4_K, "Q4_K", 256, 144, dequant_row_q4_k, dot_row_q4_k},
    {GgmlType::Q5_K, "Q5_K", 256, 176, dequant_row_q5_k, dot_row_q5_k},
    {GgmlType::Q6_K, "Q6_K", 256, 210, dequant_row_q6_k, dot_row_q6_k},
    {GgmlType::Q8_K, "Q8_K", 256, 292, nullptr, nullptr},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, nullptr, nullptr},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, nullptr, nullptr},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, nullptr, nullptr},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, nullptr, nullptr},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, dequant_row_iq4_nl, dot_row_iq4_nl},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, nullptr, nullptr},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, nullptr, nullptr},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, dequant_row_iq4_xs, dot_row_iq4_xs},
    {GgmlType::I8, "I8", 1, 1, nullptr, nullptr},
    {GgmlType::I16, "I16", 1, 2, nullptr, nullptr},
    {GgmlType::I32, "I32", 1, 4, nullptr, nullptr},
    {GgmlType::I64, "I64", 1, 8, nullptr, nullptr},
    {GgmlType::F64, "F64", 1, 8, nullptr, nullptr},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, nullptr, nullptr},
    {GgmlType::BF16, "BF16", 1, 2, dequant_row_bf16, dot_row_bf16},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, nullptr, nullptr},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, nullptr, nullptr},
    {GgmlType::MXFP4, "MXFP4", 32, 17, nullptr, nullptr},
};

constexpr uint32_t kMaxId = 40;

// Dense id -> row index, built at compile time so lookups are O(1).
constexpr std::array<int8_t, kMaxId> make_index() {
  std::array<int8_t, kMaxId> idx{};
  for (auto& v : idx) v = -1;
  for (size_t i = 0; i < std::size(kTable); ++i) idx[uint32_t(kTable[i].type)] = int8_t(i);
  return idx;
}
constexpr auto kIndex = make_index();

}  // namespace

const TypeTraits* find_type(uint32_t id) {
  if (id >= kMaxId || kIndex[id] < 0) return nullptr;
  return &kTable[size_t(kIndex[id])];
}

const TypeTraits& type_traits(GgmlType t) {
  const TypeTraits* tt = find_type(uint32_t(t));
  if (!tt) std::abort();  // a GgmlType value always names a row: a bug if not
  return *tt;
}

std::string_view type_name(GgmlType t) { return type_traits(t).name; }

const TypeTraits* find_type_by_name(std::string_view name) {
  for (const auto& t : kTable)
    if (t.name == name) return &t;
  return nullptr;
}

int vec_dot_block(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::IQ4_NL:
      return 32;
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return 256;
    default:
      return 0;
  }
}

}  // namespace kt
