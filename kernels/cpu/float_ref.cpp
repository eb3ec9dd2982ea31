#include "kernels/cpu/float_ref.h"

#include <cstring>

namespace kt::cpu {

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise into an f32 exponent
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;  // inf / nan
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7fffffff;
  if (absx > 0x7f800000) return uint16_t(sign | 0x7e00);  // nan
  if (absx >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to inf
  if (absx < 0x38800000) {  // result is subnormal or zero
    // Shift the full mantissa into place with round-to-nearest-even.
    const int e = int(absx >> 23);
    if (e < 102) return uint16_t(sign);
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    const int shift = 126 - e;  // 14 + (113 - e)
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t h = ((absx >> 13) - ((127 - 15) << 10));
  const uint32_t rem = absx & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float bf16_to_f32(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

void dequant_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void dequant_row_f16(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    dst[i] = fp16_to_f32(h);
  }
}

void dequant_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, s + 2 * i, 2);
    dst[i] = bf16_to_f32(b);
  }
}

double dot_row_f32(const void* row, const float* x, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(row);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    float w;
    std::memcpy(&w, s + 4 * i, 4);
    acc += double(w) * double(x[i]);
  }
  return acc;
}

double dot_row_f16(const void* row, const float* x, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(row);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    acc += double(fp16_to_f32(h)) * double(x[i]);
  }
  return acc;
}

double dot_row_bf16(const void* row, const float* x, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(row);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, s + 2 * i, 2);
    acc += double(bf16_to_f32(b)) * double(x[i]);
  }
  return acc;
}

}  // namespace kt::cpu
