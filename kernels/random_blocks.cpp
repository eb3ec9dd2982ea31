#include "kernels/random_blocks.h"

#include <cstring>

#include "kernels/cpu/float_ref.h"

namespace kt {
namespace {

// Byte offsets of the fp16 scale fields inside one block (ggml-common.h layouts).
struct ScaleFields {
  int n;
  int off[2];
};

ScaleFields scale_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return {1, {0, 0}};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
      return {2, {0, 2}};
    case GgmlType::Q2_K: return {2, {80, 82}};
    case GgmlType::Q3_K: return {1, {108, 0}};
    case GgmlType::Q6_K: return {1, {208, 0}};
    default: return {-1, {0, 0}};
  }
}

// The largest |code| a block's fp16 scale multiplies (sub-block scale x quant),
// so scales can be drawn to keep every weight below 1 in magnitude, as trained
// weights are; a random fp16 would give inf or values of 10^4.
float max_code(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return 8;
    case GgmlType::Q4_1: return 15;
    case GgmlType::Q5_0: return 16;
    case GgmlType::Q5_1: return 31;
    case GgmlType::Q8_0: return 128;
    case GgmlType::IQ4_NL: return 127;
    case GgmlType::Q2_K: return 15 * 3;
    case GgmlType::Q3_K: return 32 * 4;
    case GgmlType::Q4_K: return 63 * 15;
    case GgmlType::Q5_K: return 63 * 31;
    case GgmlType::Q6_K: return 128 * 32;
    case GgmlType::IQ4_XS: return 32 * 127;
    default: return 1;
  }
}

// A positive fp16 scale in [limit/16, limit/2): a block's weights stay below 1/2
// (the min terms of the *_1 and K types add at most as much again).
uint16_t small_scale(GgmlType t, SplitMix64& rng) {
  const float limit = 1.0f / max_code(t);
  return cpu::f32_to_fp16(limit * (0.0625f + 0.4375f * rng.uniform()));
}

}  // namespace

bool random_blocks_supported(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || scale_fields(t).n > 0;
}

void fill_random_blocks(GgmlType t, uint8_t* dst, uint64_t nbytes, SplitMix64& rng, float center, float spread) {
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const size_t es = type_traits(t).type_size;
    for (uint64_t i = 0; i + es <= nbytes; i += es) {
      const float v = center + spread * (2.0f * rng.uniform() - 1.0f);
      if (t == GgmlType::F32) {
        std::memcpy(dst + i, &v, 4);
      } else {
        const uint16_t h = t == GgmlType::F16 ? cpu::f32_to_fp16(v) : cpu::f32_to_bf16(v);
        std::memcpy(dst + i, &h, 2);
      }
    }
    return;
  }
  // Random bits, 8 bytes at a time, then the scales overwritten with valid ones.
  uint64_t i = 0;
  for (; i + 8 <= nbytes; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, 8);
  }
  for (; i < nbytes; ++i) dst[i] = uint8_t(rng.next());
  const ScaleFields f = scale_fields(t);
  const size_t bs = type_traits(t).type_size;
  for (uint64_t b = 0; b + bs <= nbytes; b += bs) {
    for (int k = 0; k < f.n; ++k) {
      const uint16_t h = small_scale(t, rng);
      std::memcpy(dst + b + size_t(f.off[k]), &h, 2);
    }
  }
}

}  // namespace kt
