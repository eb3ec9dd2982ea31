// Dispatch from a runtime GgmlType to kernels templated on it: the weight
// types kt's CUDA kernels take.
#pragma once

#include <type_traits>

#include "kernels/type_traits.h"
#include "kernels/vec_dot_block.h"

namespace kt::cuda {

inline bool cuda_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q5_0: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

inline bool float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Calls f(std::integral_constant<GgmlType, T>{}) for the runtime type t.
template <class F>
void with_type(GgmlType t, F&& f) {
  switch (t) {
    case GgmlType::F32: f(std::integral_constant<GgmlType, GgmlType::F32>{}); break;
    case GgmlType::F16: f(std::integral_constant<GgmlType, GgmlType::F16>{}); break;
    case GgmlType::BF16: f(std::integral_constant<GgmlType, GgmlType::BF16>{}); break;
    case GgmlType::Q8_0: f(std::integral_constant<GgmlType, GgmlType::Q8_0>{}); break;
    case GgmlType::Q4_0: f(std::integral_constant<GgmlType, GgmlType::Q4_0>{}); break;
    case GgmlType::Q5_0: f(std::integral_constant<GgmlType, GgmlType::Q5_0>{}); break;
    case GgmlType::Q4_K: f(std::integral_constant<GgmlType, GgmlType::Q4_K>{}); break;
    case GgmlType::Q5_K: f(std::integral_constant<GgmlType, GgmlType::Q5_K>{}); break;
    case GgmlType::Q6_K: f(std::integral_constant<GgmlType, GgmlType::Q6_K>{}); break;
    case GgmlType::IQ4_XS: f(std::integral_constant<GgmlType, GgmlType::IQ4_XS>{}); break;
    default: break;
  }
}

template <class F>
void with_quant_type(GgmlType t, F&& f) {
  switch (t) {
    case GgmlType::Q8_0: f(std::integral_constant<GgmlType, GgmlType::Q8_0>{}); break;
    case GgmlType::Q4_0: f(std::integral_constant<GgmlType, GgmlType::Q4_0>{}); break;
    case GgmlType::Q5_0: f(std::integral_constant<GgmlType, GgmlType::Q5_0>{}); break;
    case GgmlType::Q4_K: f(std::integral_constant<GgmlType, GgmlType::Q4_K>{}); break;
    case GgmlType::Q5_K: f(std::integral_constant<GgmlType, GgmlType::Q5_K>{}); break;
    case GgmlType::Q6_K: f(std::integral_constant<GgmlType, GgmlType::Q6_K>{}); break;
    case GgmlType::IQ4_XS: f(std::integral_constant<GgmlType, GgmlType::IQ4_XS>{}); break;
    default: break;
  }
}

// The 8-bit activation blocks a quantized type meets (32 or 256 values).
inline int act_block(GgmlType t) { return vec_dot_block(t); }

}  // namespace kt::cuda
