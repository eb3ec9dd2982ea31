// matmul_i8 (matmul_i8.h) with AVX-512 VNNI: the activations' quantizer (bit
// for bit quantize_chunk_i8) and the kernel for few rows (decode) or CPUs
// without AMX. A block of 16 weight rows meets one activation row as 16 int32
// vectors (vpdpbusd: unsigned activations q + 128 against signed weights, so
// 128 * qsum comes off after), summed across lanes into one vector whose lanes
// are the 16 rows, then scaled by the chunk's row scales and token scale.
// Int4 rows at one token: the stored nibbles (q + 8) are vpdpbusd's unsigned
// side against the signed activations, 8 * sum a taken off after, and the
// rows two chunks ahead prefetched (without both, 16 threads streamed int4
// experts at ~60% of the triad where int8's reach it; with them a V2-Lite MoE
// layer's decode went 0.31-0.34 -> 0.21-0.22 ms on the device's Xeon). Over
// several tokens each block of rows is unpacked to int8 once a call.
#include <immintrin.h>

// GCC 12 warns that the intrinsics' unused pass-through operands "may be used
// uninitialized" when inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/matmul_i8.h"

namespace kt::cpu::matmul_detail {
namespace {

// 16 vectors of 16 int32 -> one vector, lane r = the sum of v[r]'s lanes.
[[gnu::always_inline]] inline __m512i sum_lanes16(const __m512i* v) {
  __m512i t[8], u[4];
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                            _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                            _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
  // u[i]: rows 4i..4i+3 in each 128-bit lane; add the four lanes, rows to lane i.
  const __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace

float i8_quantize_chunk_avx512(const float* x, int64_t n, uint8_t* q) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  __m512 v[16];
  __m512 amax = _mm512_setzero_ps();
  for (int j = 0; j < 16; ++j) {
    const int64_t left = n - 16 * j;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
    v[j] = _mm512_maskz_loadu_ps(m, x + 16 * j);
    amax = _mm512_max_ps(amax, _mm512_and_ps(v[j], abs_mask));
  }
  const float dc = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 dv = _mm512_set1_ps(dc);
  const __mmask16 live = dc == 0.0f ? __mmask16(0) : __mmask16(0xFFFF);
  for (int j = 0; j < 16; ++j) {
    const __m512 qf = _mm512_roundscale_ps(_mm512_div_ps(v[j], dv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i qi = _mm512_maskz_cvtps_epi32(live, qf);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * j), _mm512_cvtsepi32_epi8(qi));
  }
  return dc;
}

namespace {

// One chunk of a block of int4 rows against a token's activations (signed,
// not flipped): s[r] = sum of u * a over the row's 256 values, u = q + 8 the
// stored nibble, unsigned as vpdpbusd wants it (the caller takes 8 * sum a
// off). Row r's 128 bytes hold values 0..127 in their low nibbles and
// 128..255 in their high ones; every slice runs, the padding being zeros on
// both sides.
[[gnu::always_inline]] inline void int4_sums(const uint8_t* blk, const __m512i* a, __m512i* s) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int r = 0; r < 16; ++r) {
    const __m512i v0 = _mm512_load_si512(blk + 128 * r), v1 = _mm512_load_si512(blk + 128 * r + 64);
    __m512i sr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v0, nib), a[0]);
    sr = _mm512_dpbusd_epi32(sr, _mm512_and_si512(v1, nib), a[1]);
    sr = _mm512_dpbusd_epi32(sr, _mm512_and_si512(_mm512_srli_epi16(v0, 4), nib), a[2]);
    s[r] = _mm512_dpbusd_epi32(sr, _mm512_and_si512(_mm512_srli_epi16(v1, 4), nib), a[3]);
  }
}

}  // namespace

float i4_quantize_avx512(const float* x, int64_t n, int8_t* q) {
  // ref::quantize_chunk_i4's operations, 16 floats at a time; its eight
  // interleaved double sums are the eight lanes of a __m512d.
  auto live = [&](int64_t i) {  // lanes of the 16 floats at i that hold values
    const int64_t left = n - i;
    return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  };
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  __m512 amax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    amax = _mm512_max_ps(amax, _mm512_and_ps(_mm512_maskz_loadu_ps(live(i), x + i), abs_mask));
  const float m = _mm512_reduce_max_ps(amax);
  if (m == 0.0f) {
    std::memset(q, 0, size_t(n));
    return 0.0f;
  }
  float big = 0.0f;  // the first value of largest magnitude, as the reference's strict > keeps
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) == m) {
      big = x[i];
      break;
    }
  alignas(64) float v[256];
  // Lane sums of two halves of 16 products (values i..i+7 and i+8..i+15).
  auto add16 = [](__m512d acc, __m512 a, __m512 b, __mmask16 k) {
    const __m512d lo = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)),
                                     _mm512_cvtps_pd(_mm512_castps512_ps256(b)));
    const __m512d hi = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))),
                                     _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1))));
    acc = _mm512_mask_add_pd(acc, __mmask8(k), acc, lo);
    return _mm512_mask_add_pd(acc, __mmask8(k >> 8), acc, hi);
  };
  auto tree = [](__m512d acc) {
    alignas(64) double a[8];
    _mm512_store_pd(a, acc);
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  };
  auto round_with = [&](float d, int8_t* out) {
    const __m512 dv = _mm512_set1_ps(d), magic = _mm512_set1_ps(12582912.0f);
    const __m512d dd = _mm512_set1_pd(double(d));
    __m512d err = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = live(i);
      const __m512 xi = _mm512_maskz_loadu_ps(k, x + i);
      const __m512 c = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(xi, dv), _mm512_set1_ps(-9.0f)), _mm512_set1_ps(8.0f));
      const __m512 r = _mm512_sub_ps(_mm512_add_ps(c, magic), magic);
      const __m512 vi = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-8.0f)), _mm512_set1_ps(7.0f));
      _mm512_store_ps(v + i, vi);
      _mm_mask_storeu_epi8(out + i, k, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(vi)));
      // (x - v d)^2 in double, per value
      auto half = [&](__m256 xh, __m256 vh) {
        const __m512d e = _mm512_sub_pd(_mm512_cvtps_pd(xh), _mm512_mul_pd(_mm512_cvtps_pd(vh), dd));
        return _mm512_mul_pd(e, e);
      };
      const __m512d lo = half(_mm512_castps512_ps256(xi), _mm512_castps512_ps256(vi));
      const __m512d hi = half(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xi), 1)),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(vi), 1)));
      err = _mm512_mask_add_pd(err, __mmask8(k), err, lo);
      err = _mm512_mask_add_pd(err, __mmask8(k >> 8), err, hi);
    }
    return tree(err);
  };
  const float d0 = big / -8.0f;
  const double e0 = round_with(d0, q);
  __m512d xq = _mm512_setzero_pd(), qq = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = live(i);
    const __m512 xi = _mm512_maskz_loadu_ps(k, x + i), vi = _mm512_load_ps(v + i);
    xq = add16(xq, xi, vi, k);
    qq = add16(qq, vi, vi, k);
  }
  const float d1 = float(tree(xq) / tree(qq));
  int8_t q1[256];
  const double e1 = round_with(d1, q1);
  if (!(e1 < e0)) return d0;
  std::memcpy(q, q1, size_t(n));
  return d1;
}

void i4_unpack(const uint8_t* blk, uint8_t* dst) {
  const __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  for (int r = 0; r < 16; ++r) {
    const __m512i v0 = _mm512_load_si512(blk + 128 * r), v1 = _mm512_load_si512(blk + 128 * r + 64);
    uint8_t* d = dst + 256 * r;
    _mm512_store_si512(d, _mm512_sub_epi8(_mm512_and_si512(v0, nib), eight));
    _mm512_store_si512(d + 64, _mm512_sub_epi8(_mm512_and_si512(v1, nib), eight));
    _mm512_store_si512(d + 128, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v0, 4), nib), eight));
    _mm512_store_si512(d + 192, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v1, 4), nib), eight));
  }
}

void i8_run_avx512(const uint8_t* wi8, int64_t n_in, const uint8_t* xq, int64_t n_batch, float* y, int64_t y_stride,
                   int64_t o_begin, int64_t o_end, int64_t n_out, WeightBits bits) {
  (void)n_out;
  const int64_t nc = i8_chunks(n_in);
  const int last_slices = int((n_in - (nc - 1) * kI8Chunk + 63) / 64);  // 64-value slices of the last chunk
  const size_t arb = i8_act_row_bytes(n_in);
  // Int4 over several tokens: each block of rows unpacked once to the int8
  // layout (nc x 4224 bytes of the thread's buffer), not once a token (48
  // tokens on the EPYC, 2 threads, 1408 x 2048: 0.49 ms unpacking per token
  // against 0.32 for int8).
  const bool unpack = bits == WeightBits::Int4 && n_batch > 1;
  const bool int4 = bits == WeightBits::Int4 && !unpack;
  uint8_t* unpacked = unpack ? static_cast<uint8_t*>(amx_thread_buffer(size_t(nc) * kI8BlockBytes)) : nullptr;
  const WeightBits read = int4 ? WeightBits::Int4 : WeightBits::Int8;  // the blocks the loop below reads
  const size_t bb = i8_block_bytes(read), q_bytes = i8_scales_offset(read);
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  // Int4 in registers (one token: more unpack above): the token's activation
  // sum per chunk, 8 x which comes off every row's sum (sum (q + 8) a = sum q a
  // + 8 sum a), once a call rather than once a block of rows.
  int32_t* act_sums = int4 ? static_cast<int32_t*>(amx_thread_buffer(size_t(nc) * sizeof(int32_t))) : nullptr;
  for (int64_t c = 0; int4 && c < nc; ++c) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i as = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) as = _mm512_dpbusd_epi32(as, ones, _mm512_loadu_si512(xq + c * 256 + 64 * j));
    act_sums[c] = _mm512_reduce_add_epi32(as);
  }
  for (int64_t o = o_begin; o < o_end; o += 16) {
    const uint8_t* blocks = wi8 + size_t(o / 16 * nc) * i8_block_bytes(bits);
    if (unpack) {
      for (int64_t c = 0; c < nc; ++c) {
        i4_unpack(blocks + size_t(c) * kI4BlockBytes, unpacked + size_t(c) * kI8BlockBytes);
        std::memcpy(unpacked + size_t(c) * kI8BlockBytes + i8_scales_offset(WeightBits::Int8),
                    blocks + size_t(c) * kI4BlockBytes + i8_scales_offset(WeightBits::Int4), 128);
      }
      blocks = unpacked;
    }
    const int rows = int(std::min<int64_t>(16, o_end - o));
    for (int64_t b = 0; b < n_batch; ++b) {
      const uint8_t* xb = xq + size_t(b) * arb;
      const auto* xd = reinterpret_cast<const float*>(xb + nc * 256);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t c = 0; c < nc; ++c) {
        const uint8_t* blk = blocks + size_t(c) * bb;
        __m512i a[4], s[16];
        if (int4) {
          // Two chunks ahead: a chunk of int4 rows is ~3x the instructions a
          // byte of int8's, so the core's window holds fewer of its misses.
          for (size_t i = 0; i < kI4BlockBytes; i += 64)
            _mm_prefetch(reinterpret_cast<const char*>(blk + 2 * kI4BlockBytes + i), _MM_HINT_T0);
          for (int j = 0; j < 4; ++j) a[j] = _mm512_loadu_si512(xb + c * 256 + 64 * j);
          int4_sums(blk, a, s);
          const __m512i isum = _mm512_sub_epi32(sum_lanes16(s), _mm512_set1_epi32(8 * act_sums[c]));
          const __m512 scale = _mm512_mul_ps(_mm512_load_ps(reinterpret_cast<const float*>(blk + q_bytes)),
                                             _mm512_set1_ps(xd[c]));
          acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
          continue;
        }
        for (int j = 0; j < 4; ++j)
          a[j] = _mm512_xor_si512(_mm512_loadu_si512(xb + c * 256 + 64 * j), flip);
        if (c + 1 < nc || last_slices == 4) {
          for (int r = 0; r < 16; ++r) {
            const uint8_t* wr = blk + 256 * r;
            __m512i sr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a[0], _mm512_load_si512(wr));
            sr = _mm512_dpbusd_epi32(sr, a[1], _mm512_load_si512(wr + 64));
            sr = _mm512_dpbusd_epi32(sr, a[2], _mm512_load_si512(wr + 128));
            s[r] = _mm512_dpbusd_epi32(sr, a[3], _mm512_load_si512(wr + 192));
          }
        } else {  // a short last chunk: its slices past n_in are zeros (and add 128 * 0)
          for (int r = 0; r < 16; ++r) {
            s[r] = _mm512_setzero_si512();
            for (int j = 0; j < last_slices; ++j)
              s[r] = _mm512_dpbusd_epi32(s[r], a[j], _mm512_load_si512(blk + 256 * r + 64 * j));
          }
        }
        const __m512i qsum = _mm512_load_si512(blk + q_bytes + 64);
        const __m512i isum = _mm512_sub_epi32(sum_lanes16(s), _mm512_slli_epi32(qsum, 7));
        const __m512 scale = _mm512_mul_ps(_mm512_load_ps(reinterpret_cast<const float*>(blk + q_bytes)),
                                           _mm512_set1_ps(xd[c]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
      }
      _mm512_mask_storeu_ps(y + b * y_stride + o, __mmask16((1u << rows) - 1), acc);
    }
  }
}

}  // namespace kt::cpu::matmul_detail
