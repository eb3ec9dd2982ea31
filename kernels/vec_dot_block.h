// ggml's vec_dot_type for a quantized weight type: the 8-bit blocks activations
// are rounded to before its dot products, 32 values (Q8_0) or 256 (Q8_K); 0 for
// float types and those without 8-bit dot products. The CPU and CUDA products
// and kt-fuse-calls (which has norms round rows where they write them) all ask
// here. Defined in type_traits.cpp.
#pragma once

#include "kernels/type_traits.h"

namespace kt {

int vec_dot_block(GgmlType t);

}  // namespace kt
