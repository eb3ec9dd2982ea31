// matmul_q's AVX-512 kernels for float weights (F32, F16, BF16) against float
// activations (already rounded to the weight's type by quantize_acts). Compiled
// with the same instruction sets as matmul_q_avx512.cpp (kernels/CMakeLists.txt),
// which dispatches here; entered only after active_isa() >= Isa::Avx512.
#include "kernels/cpu/matmul_q.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__F16C__)

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the "don't care"
// operand and then warn about it at every inlined use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kt::cpu::matmul_detail {
namespace {

constexpr int kTile = 8;  // activation rows a tile at most (rows_nb<1..8>)

// Activations are 4 bytes a value, more than the weights, so beside several
// activation rows a tile takes several weight rows at once: each activation load
// then serves MR rows, and the activation rows are read from cache MR times less
// often.

template <GgmlType T>
struct KernelFloat {
  static constexpr int kElem = T == GgmlType::F32 ? 4 : 2;
  static __m512 load(const uint8_t* p) {
    if constexpr (T == GgmlType::F32) return _mm512_loadu_ps(p);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (T == GgmlType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load_masked(const uint8_t* p, __mmask16 m) {
    if constexpr (T == GgmlType::F32) return _mm512_maskz_loadu_ps(m, p);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (T == GgmlType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }

  // MR weight rows (row m at w + m * wr) against NB activation rows; U
  // independent accumulators per pair so enough FMA chains are in flight.
  template <int MR, int NB, int U>
  static void tile(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const float* xr[NB];
    const uint8_t* wrow[MR];
    __m512 acc[MR][NB][U];
#pragma GCC unroll 8
    for (int r = 0; r < NB; ++r) xr[r] = reinterpret_cast<const float*>(x + size_t(r) * xs);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      wrow[m] = w + uint64_t(m) * wr;
#pragma GCC unroll 8
      for (int r = 0; r < NB; ++r)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) acc[m][r][u] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 16 * U <= n; i += 16 * U) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        __m512 wv[MR];
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) wv[m] = load(wrow[m] + (i + 16 * u) * kElem);
#pragma GCC unroll 8
        for (int r = 0; r < NB; ++r) {
          const __m512 xv = _mm512_loadu_ps(xr[r] + i + 16 * u);
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) acc[m][r][u] = _mm512_fmadd_ps(wv[m], xv, acc[m][r][u]);
        }
      }
    }
    for (; i < n; i += 16) {
      const __mmask16 mk = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
      __m512 wv[MR];
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) wv[m] = load_masked(wrow[m] + i * kElem, mk);
#pragma GCC unroll 8
      for (int r = 0; r < NB; ++r) {
        const __m512 xv = _mm512_maskz_loadu_ps(mk, xr[r] + i);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) acc[m][r][0] = _mm512_fmadd_ps(wv[m], xv, acc[m][r][0]);
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int r = 0; r < NB; ++r) {
        __m512 s = acc[m][r][0];
#pragma GCC unroll 4
        for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[m][r][u]);
        y[r * ys + m] = _mm512_reduce_add_ps(s);
      }
    }
  }

  template <int NB>
  static void rows_nb(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys,
                      int64_t o0, int64_t o1) {
    // The leftover rows keep U, so every output sums in the same order however
    // [o0, o1) is split.
    // Measured on a Zen 4 (BF16, 14336 x 4096 from DRAM): one activation row does
    // best on one weight stream (20.6 GB/s; 15.0 with 4 rows at once), 2-4 rows
    // with 4 weight rows (16.9 GB/s at 2; 12.6 with 2 weight rows), 5-8 rows with 3
    // (8.5 GB/s at 8; 7.1 with 2). Software prefetch slows these loops down (14 GB/s
    // at 1 row), unlike the quantized ones.
    // U is the same for every NB: each output's sum then runs in the same order
    // whatever the batch, so a token's result does not depend on the tokens
    // that share its step (continuous batching; cpu_kernels_test checks it).
    constexpr int MR = NB == 1 ? 1 : NB <= 4 ? 2 : 1;
    constexpr int U = 2;
    int64_t o = o0;
    for (; o + MR <= o1; o += MR) tile<MR, NB, U>(w + uint64_t(o) * wr, wr, n, x, xs, y + o, ys);
    for (; o < o1; ++o) tile<1, NB, U>(w + uint64_t(o) * wr, wr, n, x, xs, y + o, ys);
  }
};

// The float kernels tile weight rows too, so they get their own driver.
template <GgmlType T>
void drive_float(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab, int64_t n_batch, float* y,
                 int64_t ys, int64_t o0, int64_t o1) {
  using K = KernelFloat<T>;
  int64_t b = 0;
  // Weights in cache (up to 1 MB: a MoE router's 64 x 2048 F32): runs of 4
  // rows, which take 2 weight rows a tile, so each activation load serves two
  // (8 rows take one: a load per multiply-add). A 512-token router call, two
  // threads of the EPYC here: 2.36 -> 1.89 ms (best of 12). The same sums.
  if (uint64_t(o1 - o0) * wr <= (uint64_t(1) << 20))
    for (; n_batch - b >= 4; b += 4) K::template rows_nb<4>(w, wr, n, xq + size_t(b) * ab, ab, y + b * ys, ys, o0, o1);
  for (; n_batch - b >= kTile; b += kTile) K::template rows_nb<kTile>(w, wr, n, xq + size_t(b) * ab, ab, y + b * ys, ys, o0, o1);
  const uint8_t* x = xq + size_t(b) * ab;
  float* yb = y + b * ys;
  switch (n_batch - b) {
    case 7: K::template rows_nb<7>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 6: K::template rows_nb<6>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 5: K::template rows_nb<5>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 4: K::template rows_nb<4>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 3: K::template rows_nb<3>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 2: K::template rows_nb<2>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 1: K::template rows_nb<1>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    default: break;
  }
}

}  // namespace

bool matmul_float_avx512(GgmlType t, const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab,
                         int64_t nbt, float* y, int64_t ys, int64_t o0, int64_t o1) {
  switch (t) {
    case GgmlType::F32: drive_float<GgmlType::F32>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::F16: drive_float<GgmlType::F16>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::BF16: drive_float<GgmlType::BF16>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    default: return false;
  }
}

}  // namespace kt::cpu::matmul_detail

#else  // not built with AVX-512: the dispatcher never gets here

namespace kt::cpu::matmul_detail {
bool matmul_float_avx512(GgmlType, const uint8_t*, uint64_t, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t,
                         int64_t, int64_t) {
  return false;
}
}  // namespace kt::cpu::matmul_detail

#endif
