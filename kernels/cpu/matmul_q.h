// Matrix products with GGUF-encoded weights on the CPU, as llama.cpp's CPU backend
// computes them: the activation rows are quantized once per call to the weight
// type's vec_dot type (Q8_0 blocks for the 32-value types, Q8_K blocks for the
// k-quants and IQ4_XS, F16/BF16 for F16/BF16 weights, nothing for F32), then every
// output is an integer dot product per block, scaled and summed in float.
//
// What it computes is fixed by the reference: y[b][o] equals
// ref::matmul(type, w, n_in, n_out, x, n_batch, y, ActRounding::GgmlCpu) up to
// float summation (test/unit/matmul_q_test.cpp states the bound), and the rounded
// activations are the reference's bit for bit (dequantize_acts).
//
// The kernel is chosen per call from active_isa() (cpu_features.h): AVX-512 VNNI,
// AVX2, or portable scalar C++; matmul_q_impl() names the one a type gets now.
// Every weight block is unpacked once per tile of activation rows (8 with
// AVX-512, 4 with AVX2) and used by all of them, so decode (n_batch 1..8) reads
// each weight byte once per call; with all cores it is bound by memory bandwidth.
//
// Usage (one call per matrix; threads split the output rows):
//   std::vector<uint8_t> xq(n_batch * act_row_bytes(type, n_in));  // 64-byte aligned is best
//   quantize_acts(type, x, n_in, n_batch, n_in, xq.data());
//   parallel over [o0, o1): matmul_q(type, w, row_bytes, n_in, xq.data(), n_batch, y, n_out, o0, o1);
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cpu {

// Whether matmul_q computes with this weight type: F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K..Q6_K, IQ4_XS (every type with reference kernels).
bool matmul_q_supported(GgmlType weight_type);

// The kernel a type gets at the current ISA level: "avx512-vnni", "avx2" or
// "scalar"; "unsupported" for types matmul_q does not take.
const char* matmul_q_impl(GgmlType weight_type);

// Bytes one activation row of n_in values takes once quantized for weight_type
// (a multiple of 64). n_in must be a multiple of the type's block size.
size_t act_row_bytes(GgmlType weight_type, int64_t n_in);

// Quantizes n_rows rows of n_in floats (row r at x + r * x_stride) for weight_type
// into dst: n_rows rows of act_row_bytes(weight_type, n_in) each. The layout is
// kt's own (not ggml's block_q8_0/q8_K: scales and sums are kept apart from the
// int8 values, in the order the kernels read them) and, for finite inputs, the
// same bytes at every ISA level.
void quantize_acts(GgmlType weight_type, const float* x, int64_t x_stride, int64_t n_rows,
                   int64_t n_in, void* dst);

// One quantized activation row back to the floats it stands for: equal, bit for
// bit, to ref::round_activations(weight_type, ActRounding::GgmlCpu, ...) of the
// row it was made from.
void dequantize_acts(GgmlType weight_type, const void* xq_row, int64_t n_in, float* x);

// y[b * y_stride + o] = dot(weight row o, activation row b) for o in
// [o_begin, o_end) and b in [0, n_batch). w: the whole matrix, row o at
// w + o * w_row_bytes (any byte alignment); xq: quantize_acts' output for n_batch
// rows of n_in values. Writes nothing else. Thread-safe: callers split
// [0, n_out) across threads.
void matmul_q(GgmlType weight_type, const void* w, uint64_t w_row_bytes, int64_t n_in,
              const void* xq, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin,
              int64_t o_end);

// Callers that multiply the same activation rows by many blocks of weight rows
// (the MoE operator: every block of an expert's rows) may lay the rows out once
// in the kernel's own layout and pass that to each call instead of xq. The
// result is the same as matmul_q's.
//   size_t bytes = tiled_acts_bytes(type, n_in, n_batch);  // 0: matmul_q does not tile these
//   tile_acts(type, xq, n_in, n_batch, buf);               // once (buf 64-byte aligned)
//   matmul_q_tiled(type, w, row_bytes, n_in, buf, n_batch, y, y_stride, o0, o1);  // per block
// tiled_acts_bytes is 0 where the CPU has no AMX, for fewer than kAmxMinBatch
// rows and for types the tiles do not cover; then call matmul_q.
size_t tiled_acts_bytes(GgmlType weight_type, int64_t n_in, int64_t n_batch);
void tile_acts(GgmlType weight_type, const void* xq, int64_t n_in, int64_t n_batch, void* dst);
void matmul_q_tiled(GgmlType weight_type, const void* w, uint64_t w_row_bytes, int64_t n_in,
                    const void* tiles, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin,
                    int64_t o_end);

// ---- shared by the ISA files (matmul_q*.cpp); not an interface -----------------
namespace matmul_detail {

// The three activation layouts, per row (n = n_in; rows are whole multiples of 64
// bytes, regions start at multiples of 32):
//
//  Float (F32, F16, BF16 weights): float x[n], already rounded to F16/BF16.
//
//  Q8_0 kind (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL), nb = n / 32 blocks:
//    uint8_t qs[nb * 32]  q + 128 (q in [-127, 127], value j of block k at 32k + j):
//                         unsigned, so vpdpbusd takes it as is against signed weights
//    float   dexp[nb * 8] the block's fp16 scale (as a float), repeated 8 times:
//                         one per int32 lane a vpdpbusd of the block fills
//    int32_t qsum[nb]     sum of the block's q (the *_1 types' min term)
//
//  Q8_K kind (Q2_K..Q6_K, IQ4_XS), nb = n / 256 super-blocks:
//    int8_t  qs[nb * 256] q in [-127, 127]; natural value order, except IQ4_XS
//                         (see iq4xs_act_pos)
//    float   bsumf[nb * 16] d * (sum of q over values 16t..16t+15)
//    int16_t bsum[nb * 16]  the same sums as integers
//    float   d[nb]
struct ActQ8_0View {
  const uint8_t* qs;
  const float* dexp;
  const int32_t* qsum;
};
struct ActQ8_KView {
  const int8_t* qs;
  const float* bsumf;
  const int16_t* bsum;
  const float* d;
};

enum class ActKind { Float, Q8_0, Q8_K, None };
ActKind act_kind(GgmlType weight_type);

// The helpers below are included by files compiled with -mavx512*/-mavx2. An
// inline function that a compiler emits out of line there (unoptimized builds do)
// is a weak symbol the linker may pick for every caller, the portable path too,
// which would then run AVX-512 code on any CPU. always_inline keeps them from
// being emitted out of line in those files.
#define KT_ISA_SAFE_INLINE [[gnu::always_inline]] inline

// The parts of a row of n values, for the quantizers that write them (the one
// place the offsets are spelled out) and, read only, for the kernels.
struct ActQ8_0Rows {
  uint8_t* qs;
  float* dexp;
  int32_t* qsum;
};
struct ActQ8_KRows {
  int8_t* qs;
  float* bsumf;
  int16_t* bsum;
  float* d;
};
KT_ISA_SAFE_INLINE ActQ8_0Rows act_q8_0_rows(void* row, int64_t n) {
  auto* p = static_cast<uint8_t*>(row);
  const int64_t nb = n / 32;
  return {p, reinterpret_cast<float*>(p + nb * 32), reinterpret_cast<int32_t*>(p + nb * 64)};
}
KT_ISA_SAFE_INLINE ActQ8_KRows act_q8_k_rows(void* row, int64_t n) {
  auto* p = static_cast<uint8_t*>(row);
  const int64_t nb = n / 256;
  return {reinterpret_cast<int8_t*>(p), reinterpret_cast<float*>(p + nb * 256),
          reinterpret_cast<int16_t*>(p + nb * 320), reinterpret_cast<float*>(p + nb * 352)};
}
KT_ISA_SAFE_INLINE ActQ8_0View act_q8_0(const void* row, int64_t n) {
  const ActQ8_0Rows r = act_q8_0_rows(const_cast<void*>(row), n);  // read only
  return {r.qs, r.dexp, r.qsum};
}
KT_ISA_SAFE_INLINE ActQ8_KView act_q8_k(const void* row, int64_t n) {
  const ActQ8_KRows r = act_q8_k_rows(const_cast<void*>(row), n);  // read only
  return {r.qs, r.bsumf, r.bsum, r.d};
}

// Bytes of a row's layout before the padding to 64.
KT_ISA_SAFE_INLINE size_t act_payload_bytes(ActKind kind, int64_t n) {
  switch (kind) {
    case ActKind::Float: return size_t(n) * 4;
    case ActKind::Q8_0: return size_t(n / 32) * 68;   // 32 qs + 32 dexp + 4 qsum
    case ActKind::Q8_K: return size_t(n / 256) * 356;  // 256 qs + 64 bsumf + 32 bsum + 4 d
    default: return 0;
  }
}

// IQ4_XS keeps sub-block s (32 values) in 16 bytes: value i of it in the low
// nibble of byte i, value 16 + i in the high nibble. Its activations are stored
// so that one 64-byte load of weights (4 sub-blocks) split into low and high
// nibbles meets 64 contiguous activations each: within each 128 values, the low
// halves of the 4 sub-blocks, then their high halves.
KT_ISA_SAFE_INLINE int iq4xs_act_pos(int v) {
  const int s = v / 32, h = (v / 16) % 2, i = v % 16;
  return 128 * (s / 4) + 64 * h + 16 * (s % 4) + i;
}

// The per-ISA entry points: each returns false, touching nothing, for a type it
// does not cover (the dispatcher then goes one level down).
bool matmul_q_avx512(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in,
                     const uint8_t* xq, size_t act_bytes, int64_t n_batch, float* y,
                     int64_t y_stride, int64_t o_begin, int64_t o_end);
bool matmul_q_avx512_covers(GgmlType t);
// F32, F16 and BF16 weights (matmul_q_avx512_float.cpp; matmul_q_avx512 calls it).
bool matmul_float_avx512(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* xq,
                         size_t act_bytes, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin,
                         int64_t o_end);
bool quantize_acts_avx512(GgmlType t, const float* x, int64_t x_stride, int64_t n_rows,
                          int64_t n_in, uint8_t* dst, size_t act_bytes);
// AMX-INT8 tiles (matmul_q_amx.cpp) for Q4_K, Q5_K, Q6_K, used from
// kAmxMinBatch activation rows on. emulate: the tile instructions computed in
// plain C++ (for tests on CPUs without AMX; the rest needs AVX-512).
constexpr int64_t kAmxMinBatch = 16;
bool matmul_q_amx_covers(GgmlType t);
bool matmul_q_amx(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* xq,
                  size_t act_bytes, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end,
                  bool emulate);
// The tiled activations (tiled_acts_bytes and friends above).
size_t amx_tiles_bytes(GgmlType t, int64_t n_in, int64_t n_batch);
void amx_pack_tiles(GgmlType t, const uint8_t* xq, size_t act_bytes, int64_t n_in, int64_t n_batch, uint8_t* dst);
void matmul_q_amx_tiles(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* tiles,
                        int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool emulate);
bool matmul_q_avx2(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in,
                   const uint8_t* xq, size_t act_bytes, int64_t n_batch, float* y,
                   int64_t y_stride, int64_t o_begin, int64_t o_end);
bool matmul_q_avx2_covers(GgmlType t);

}  // namespace matmul_detail
}  // namespace kt::cpu
