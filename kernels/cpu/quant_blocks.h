// ggml's quantization blocks (ggml-common.h), field for field, and the two row
// loops every reference kernel shares. A row of n values is n / kValues blocks laid
// end to end with no padding; sizes are asserted against the type table's numbers.
//
// Blocks arrive from an mmap at any byte alignment, so they are never read through
// a cast pointer: load_block() copies one block into a local struct. Multi-byte
// fields (the fp16 scales, Q5_0/Q5_1's qh, IQ4_XS's scales_h) are little-endian in
// the file, which is the host order on every machine kt targets.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kt::cpu {

static_assert(std::endian::native == std::endian::little,
              "block fields are read in host order; GGUF stores them little-endian");

inline constexpr int kQK = 32;   // values per block of the legacy types and IQ4_NL
inline constexpr int kQKK = 256; // values per super-block of the K types and IQ4_XS

// IQ4_NL / IQ4_XS code book: a non-uniform 4-bit grid (ggml-common.h kvalues_iq4nl).
inline constexpr int8_t kValuesIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ---- legacy 32-value blocks ------------------------------------------------------
// qs: value j in the low nibble of qs[j], value j+16 in the high nibble.

struct BlockQ4_0 {  // x = d * (q - 8)
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  uint8_t qs[kQK / 2];
};

struct BlockQ4_1 {  // x = d * q + m
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[kQK / 2];
};

struct BlockQ5_0 {  // x = d * (q - 16); bit 4 of value j is bit j of qh
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

struct BlockQ5_1 {  // x = d * q + m
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

struct BlockQ8_0 {  // x = d * q
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  int8_t qs[kQK];
};

struct BlockIq4_nl {  // x = d * kValuesIq4nl[q]
  static constexpr int kValues = kQK;
  uint16_t d;  // fp16
  uint8_t qs[kQK / 2];
};

// ---- 256-value super-blocks ------------------------------------------------------

// 16 sub-blocks of 16; 2-bit q; per sub-block a 4-bit scale (low nibble) and a
// 4-bit min (high nibble): x = d * sc * q - dmin * m.
struct BlockQ2_K {
  static constexpr int kValues = kQKK;
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
};

// 16 sub-blocks of 16; 2 low bits in qs, the third bit in hmask (set means q >= 0,
// i.e. no -4 offset); 6-bit signed scales (stored +32) packed into 12 bytes.
struct BlockQ3_K {
  static constexpr int kValues = kQKK;
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;  // fp16
};

// 8 sub-blocks of 32; 4-bit q; 6-bit scale and min per sub-block packed into 12
// bytes (see get_scale_min_k4): x = d * sc * q - dmin * m.
struct BlockQ4_K {
  static constexpr int kValues = kQKK;
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};

// Q4_K plus a fifth bit per value in qh.
struct BlockQ5_K {
  static constexpr int kValues = kQKK;
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};

// 16 sub-blocks of 16; 6-bit q (4 low bits in ql, 2 high in qh) stored +32;
// signed 8-bit scales: x = d * sc * (q - 32).
struct BlockQ6_K {
  static constexpr int kValues = kQKK;
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;  // fp16
};

// 8 sub-blocks of 32 with IQ4_NL's code book; 6-bit scales stored +32, the low
// 4 bits in scales_l (two per byte), the high 2 in scales_h.
struct BlockIq4_xs {
  static constexpr int kValues = kQKK;
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

// Bytes per block, as in ggml-common.h and kernels/type_traits.cpp.
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockIq4_nl) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIq4_xs) == 136);

// Q4_K/Q5_K's 8 six-bit scales and mins in 12 bytes (ggml's get_scale_min_k4):
// sub-blocks 0-3 keep theirs in the low 6 bits of bytes 0-3 (scale) and 4-7 (min);
// sub-blocks 4-7 keep the low 4 bits in the nibbles of bytes 8-11 and the high
// 2 bits in the top bits of bytes 0-3 (scale) and 4-7 (min). always_inline: files
// compiled with -mavx512* include this too, and an out-of-line copy from one of
// them could be the one the linker keeps for every caller.
[[gnu::always_inline]] inline void scale_min_k4(const uint8_t q[12], int s, int* sc, int* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// Block i of a row, copied out of memory of any alignment.
template <class Block>
Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + i * int64_t(sizeof(Block)), sizeof(Block));
  return b;
}

// Decodes a row block by block with decode(const Block&, float* out).
template <class Block, class Decode>
void dequant_row_blocks(const void* src, float* dst, int64_t n, Decode decode) {
  for (int64_t i = 0; i < n / Block::kValues; ++i)
    decode(load_block<Block>(src, i), dst + i * Block::kValues);
}

// Dot product of a row with x: each block is decoded exactly as dequant_row does,
// then every product and the sum are taken in double. A product of two floats is
// exact in double, so the only error is the sum's (~1e-16 of the terms' magnitude):
// the result is the true dot product of the decoded row, a fixed point that fast
// kernels (float sums, int8 activations) are measured against.
template <class Block, class Decode>
double dot_row_blocks(const void* row, const float* x, int64_t n, Decode decode) {
  float w[Block::kValues];
  double sum = 0.0;
  for (int64_t i = 0; i < n / Block::kValues; ++i) {
    decode(load_block<Block>(row, i), w);
    const float* xb = x + i * Block::kValues;
    for (int j = 0; j < Block::kValues; ++j) sum += double(w[j]) * double(xb[j]);
  }
  return sum;
}

// The public pair for one type, over its block decoder decode_<t>(const Block&, float*):
// dequant_row_<t> and dot_row_<t> as declared in quant_ref.h.
#define KT_DEFINE_QUANT_REF(t, Block)                                   \
  void dequant_row_##t(const void* src, float* dst, int64_t n) {       \
    dequant_row_blocks<Block>(src, dst, n, decode_##t);                 \
  }                                                                     \
  double dot_row_##t(const void* row, const float* x, int64_t n) {     \
    return dot_row_blocks<Block>(row, x, n, decode_##t);                \
  }

}  // namespace kt::cpu
