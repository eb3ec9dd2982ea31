// AVX-512 row dequantizers for vec::dequant (vec_f32.h): the GGUF types the
// CPU's MLA weights come in (k_b Q5_0/Q8_0, v_b and kv_b Q4_K/Q6_K/IQ4_XS,
// Q4_0). Each value is computed with the reference decoder's operations in its
// order (quant_ref_*.cpp: the same float multiplies and subtractions, no FMA:
// this file is compiled without contraction), so the floats are the reference's
// bit for bit. Compiled with -mavx512f/bw/vl and -mf16c only for this file;
// called after the CPU check in vec_f32.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/type_traits.h"

namespace kt::kern::vec::avx512 {

namespace {

using namespace kt::cpu;

// Blocks are read in place (no load_block copy: a copied struct read back by
// vector loads stalls on store forwarding, ~3x slower); fields at their
// offsetof in the block.
template <class Block>
inline const uint8_t* block_ptr(const void* row, int64_t i) {
  return static_cast<const uint8_t*>(row) + i * int64_t(sizeof(Block));
}
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
#define KT_FIELD(Block, p, f) ((p) + offsetof(Block, f))

// 16 bytes as 16 int32 lanes.
inline __m512i u8x16(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// The low and high nibbles of 16 bytes, as int32 lanes.
inline __m512i lo_nibbles(const uint8_t* p) { return _mm512_and_si512(u8x16(p), _mm512_set1_epi32(0xF)); }
inline __m512i hi_nibbles(const uint8_t* p) { return _mm512_srli_epi32(u8x16(p), 4); }

inline void store_scaled(float* y, __m512i q, float d) {
  _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(d)));
}

void q4_0(const void* row, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const uint8_t* b = block_ptr<BlockQ4_0>(row, i);
    const float d = half_at(KT_FIELD(BlockQ4_0, b, d));
    const uint8_t* qs = KT_FIELD(BlockQ4_0, b, qs);
    const __m512i eight = _mm512_set1_epi32(8);
    store_scaled(y, _mm512_sub_epi32(lo_nibbles(qs), eight), d);
    store_scaled(y + 16, _mm512_sub_epi32(hi_nibbles(qs), eight), d);
  }
}

void q5_0(const void* row, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const uint8_t* b = block_ptr<BlockQ5_0>(row, i);
    const float d = half_at(KT_FIELD(BlockQ5_0, b, d));
    const uint8_t* qs = KT_FIELD(BlockQ5_0, b, qs);
    uint32_t qh;
    std::memcpy(&qh, KT_FIELD(BlockQ5_0, b, qh), 4);
    const __m512i sixteen = _mm512_set1_epi32(16);
    // Bit j of qh is the fifth bit of value j: add 16 where it is set.
    const __m512i lo = lo_nibbles(qs), hi = hi_nibbles(qs);
    const __m512i x0 = _mm512_mask_or_epi32(lo, __mmask16(qh), lo, sixteen);
    const __m512i x1 = _mm512_mask_or_epi32(hi, __mmask16(qh >> 16), hi, sixteen);
    store_scaled(y, _mm512_sub_epi32(x0, sixteen), d);
    store_scaled(y + 16, _mm512_sub_epi32(x1, sixteen), d);
  }
}

void q8_0(const void* row, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const uint8_t* b = block_ptr<BlockQ8_0>(row, i);
    const float d = half_at(KT_FIELD(BlockQ8_0, b, d));
    const uint8_t* qs = KT_FIELD(BlockQ8_0, b, qs);
    for (int h = 0; h < 2; ++h)
      store_scaled(y + 16 * h, _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h))), d);
  }
}

void q4_k(const void* row, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const uint8_t* b = block_ptr<BlockQ4_K>(row, i);
    const float d = half_at(KT_FIELD(BlockQ4_K, b, d)), dmin = half_at(KT_FIELD(BlockQ4_K, b, dmin));
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      scale_min_k4(KT_FIELD(BlockQ4_K, b, scales), s, &sc, &m);
      const __m512 dl = _mm512_set1_ps(d * float(sc)), ml = _mm512_set1_ps(dmin * float(m));
      // Sub-blocks 2p and 2p+1 share 32 bytes: low nibbles, then high.
      const uint8_t* qs = KT_FIELD(BlockQ4_K, b, qs) + 32 * (s / 2);
      for (int h = 0; h < 2; ++h) {
        const __m512i q = (s % 2) ? hi_nibbles(qs + 16 * h) : lo_nibbles(qs + 16 * h);
        _mm512_storeu_ps(y + 32 * s + 16 * h, _mm512_sub_ps(_mm512_mul_ps(dl, _mm512_cvtepi32_ps(q)), ml));
      }
    }
  }
}

void q6_k(const void* row, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const uint8_t* b = block_ptr<BlockQ6_K>(row, i);
    const float d = half_at(KT_FIELD(BlockQ6_K, b, d));
    const uint8_t *ql = KT_FIELD(BlockQ6_K, b, ql), *qh = KT_FIELD(BlockQ6_K, b, qh);
    const auto* scales = reinterpret_cast<const int8_t*>(KT_FIELD(BlockQ6_K, b, scales));
    for (int hf = 0; hf < 2; ++hf)
      for (int k = 0; k < 4; ++k)
        for (int l0 = 0; l0 < 32; l0 += 16) {
          const __m512i lo_b = u8x16(ql + 64 * hf + 32 * (k % 2) + l0);
          const __m512i lo = k < 2 ? _mm512_and_si512(lo_b, _mm512_set1_epi32(0xF)) : _mm512_srli_epi32(lo_b, 4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(u8x16(qh + 32 * hf + l0), 2 * k), _mm512_set1_epi32(3));
          const __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
          // ggml multiplies (d * sc) * q.
          const float dsc = d * float(scales[8 * hf + 2 * k + l0 / 16]);
          store_scaled(y + 128 * hf + 32 * k + l0, q, dsc);
        }
  }
}

void iq4_xs(const void* row, float* y, int64_t nb) {
  const __m512i book = _mm512_setr_epi32(kValuesIq4nl[0], kValuesIq4nl[1], kValuesIq4nl[2], kValuesIq4nl[3],
                                         kValuesIq4nl[4], kValuesIq4nl[5], kValuesIq4nl[6], kValuesIq4nl[7],
                                         kValuesIq4nl[8], kValuesIq4nl[9], kValuesIq4nl[10], kValuesIq4nl[11],
                                         kValuesIq4nl[12], kValuesIq4nl[13], kValuesIq4nl[14], kValuesIq4nl[15]);
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const uint8_t* b = block_ptr<BlockIq4_xs>(row, i);
    const float d = half_at(KT_FIELD(BlockIq4_xs, b, d));
    uint16_t scales_h;
    std::memcpy(&scales_h, KT_FIELD(BlockIq4_xs, b, scales_h), 2);
    const uint8_t* scales_l = KT_FIELD(BlockIq4_xs, b, scales_l);
    for (int s = 0; s < 8; ++s) {
      const int lo = (scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
      const int hi = (scales_h >> (2 * s)) & 3;
      const __m512 dl = _mm512_set1_ps(d * float((lo | hi << 4) - 32));
      const uint8_t* qs = KT_FIELD(BlockIq4_xs, b, qs) + 16 * s;
      _mm512_storeu_ps(y + 32 * s, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(lo_nibbles(qs), book))));
      _mm512_storeu_ps(y + 32 * s + 16,
                       _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(hi_nibbles(qs), book))));
    }
  }
}

#undef KT_FIELD

}  // namespace

bool dequant_covers(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0:
    case GgmlType::Q4_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool dequant(GgmlType type, const void* row, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::Q4_0: return q4_0(row, dst, n / kQK), true;
    case GgmlType::Q5_0: return q5_0(row, dst, n / kQK), true;
    case GgmlType::Q8_0: return q8_0(row, dst, n / kQK), true;
    case GgmlType::Q4_K: return q4_k(row, dst, n / kQKK), true;
    case GgmlType::Q6_K: return q6_k(row, dst, n / kQKK), true;
    case GgmlType::IQ4_XS: return iq4_xs(row, dst, n / kQKK), true;
    default: return false;
  }
}

}  // namespace kt::kern::vec::avx512
