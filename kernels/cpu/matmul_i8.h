// Matrix products over weights repacked at load to int8 (KTransformers'
// `backend: "AMXInt8"` on the routed experts): each weight row is decoded as the
// reference decodes it and requantized per chunk of 256 values to int8 with one
// float scale (ref::quantize_chunk_i8: d = max |w| / 127, q = nearest(w / d)); activations are rounded
// the same way per token and chunk. Then
//   y[b][o] = sum over chunks c of d_w[o][c] * d_x[b][c] * sum_k q_w[o][k] q_x[b][k]
// which is ref::matmul(..., ActRounding::Int8) up to float summation order.
//
// Why. matmul_q keeps ggml's integer sums over a k-quant's 32-value
// sub-blocks, each with its own scale, so the AMX-INT8 tiles are read back and
// scaled every 32 values (~0.4 TFLOP/s a core); matmul_bf16 decodes the
// weights per call, half its time at prefill's ~48 tokens an expert. Here the
// weights are already in the tiles' type and layout, and a chunk's scale is
// one per row, so the C tiles add over 256 values (four tile products) before
// they are read back, and nothing is decoded per call. The price: a Q4_K
// weight takes 8.25 bits instead of 4.5 (the repacked matrices replace the
// file's; the file's pages are never read again), so decode reads 1.8x the
// bytes; and the requantization moves each weight by at most d / 2, ~1/254 of
// its chunk's largest (a Q4_K step is ~1/30 of its sub-block's range).
//
// Layout of one repacked matrix (n_out x n_in), blocks of 16 rows x 256 values,
// chunk-major within a block of rows, each block 4224 bytes:
//   int8_t  q[16][256]   row r's 256 values (zeros past n_in and n_out)
//   float   d[16]        each row's scale for this chunk
//   int32_t qsum[16]     each row's sum of q (AVX-512 VNNI multiplies unsigned
//                        activations: q_x + 128, then subtracts 128 qsum)
// Activation rows (i8_act_row_bytes each): int8 q[chunks * 256], float d[chunks],
// padded to 64 bytes.
//
// Int4 (KTransformers' AMXInt4): the same chunks with 4-bit values, q in
// [-8, 7] (ref::quantize_chunk_i4: d from the chunk's largest magnitude, then
// refined by least squares), stored as q + 8, two a byte. Same activations, same
// tiles, same sums; each block of rows is unpacked to the int8 layout per call
// (in registers for VNNI, into 4 KB of L1 for the tiles). Why: at prefill's ~48
// tokens an expert the int8 loop waits on the weights' bytes (what one core
// fetches, not DRAM: kernels/cpu/README.md), and int4 halves them; the price is
// the coarser weights (a 256-value chunk's step is its largest / 8).
// A block of 16 rows x 256 values, 2176 bytes:
//   uint8_t u[16][128]   row r: byte j holds value j + 8 (low nibble) and value
//                        j + 128, + 8 (high nibble); 8 (zero) past n_in and n_out
//   float   d[16], int32_t qsum[16]   as for int8
//
// Usage (per matrix; threads split the output rows at multiples of 16):
//   repack_i8(type, w, row_bytes, n_in, n_out, dst, rb0, rb1)   // at load, by blocks of rows
//   quantize_acts_i8(x, x_stride, n_rows, n_in, xq)             // per call
//   [i8_tiles_bytes / tile_acts_i8: lay rows out once for AMX when many calls share them]
//   matmul_i8(wi8, n_in, n_out, xq, tiles_or_null, n_batch, y, y_stride, o0, o1)
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cpu {

constexpr int64_t kI8Chunk = 256;  // values per scale
constexpr size_t kI8BlockBytes = 16 * 256 + 64 + 64;
constexpr size_t kI4BlockBytes = 16 * 128 + 64 + 64;

// The repacked weights' values: int8 (AMXInt8) or int4 (AMXInt4).
enum class WeightBits : uint8_t { Int8, Int4 };
constexpr size_t i8_block_bytes(WeightBits bits) { return bits == WeightBits::Int4 ? kI4BlockBytes : kI8BlockBytes; }
// Where a block's d[16] starts (its values' bytes; qsum[16] follows at + 64).
constexpr size_t i8_scales_offset(WeightBits bits) { return bits == WeightBits::Int4 ? 16 * 128 : 16 * 256; }

int64_t i8_chunks(int64_t n_in);
int64_t i8_row_blocks(int64_t n_out);
size_t i8_matrix_bytes(int64_t n_in, int64_t n_out, WeightBits bits = WeightBits::Int8);
// Repacks blocks of rows [rb_begin, rb_end) (16 rows each) of a GGUF matrix
// (row o at w + o * w_row_bytes) into dst, a buffer of i8_matrix_bytes.
void repack_i8(GgmlType type, const void* w, uint64_t w_row_bytes, int64_t n_in, int64_t n_out, void* dst,
               int64_t rb_begin, int64_t rb_end, WeightBits bits = WeightBits::Int8);

// `rows` rows of a GGUF matrix starting at w into dst as a matrix of that many
// rows (i8_matrix_bytes(n_in, rows)): what a call that requantizes its weights
// per call (cpu.matmul's int8_rows) repacks into a buffer of its own.
void repack_i8_rows(GgmlType type, const void* w, uint64_t w_row_bytes, int64_t n_in, int64_t rows, void* dst,
                    WeightBits bits = WeightBits::Int8);
// A whole weight of n_mat matrices (matrix e at w + e * w_mat_bytes) into dst,
// i8_matrix_bytes apart, over n_threads threads (a DeepSeek-V2-Lite layer's
// experts are ~550 M weights: seconds on one core).
void repack_i8_matrices(GgmlType type, const void* w, uint64_t w_row_bytes, uint64_t w_mat_bytes, int64_t n_in,
                        int64_t n_out, int64_t n_mat, void* dst, int n_threads, WeightBits bits = WeightBits::Int8);

size_t i8_act_row_bytes(int64_t n_in);
void quantize_acts_i8(const float* x, int64_t x_stride, int64_t n_rows, int64_t n_in, void* dst);
// Chunk c of one activation row (xq: its i8_act_row_bytes(n_in)), from the
// chunk's values x[0, min(256, n_in - 256 c)): what quantize_acts_i8 writes
// there (it is this, chunk by chunk), for a caller that makes a row's values a
// chunk at a time (the MoE operator's SwiGLU). The last chunk also zeroes the
// row's padding.
void quantize_act_chunk_i8(const float* x, int64_t n_in, int64_t c, void* xq);
// Where rows [o, ...) of a repacked matrix start (o a multiple of 16): with
// n_out - o rows from there it is itself a repacked matrix.
inline size_t i8_rows_offset(int64_t n_in, int64_t o, WeightBits bits) {
  return size_t(o / 16) * size_t(i8_chunks(n_in)) * i8_block_bytes(bits);
}

// With AMX: the rows laid out once as the tiles' activations (0 bytes where the
// CPU has no AMX, or for fewer than kI8TileMinBatch rows: pass nullptr then).
constexpr int64_t kI8TileMinBatch = 8;
size_t i8_tiles_bytes(int64_t n_in, int64_t n_batch);
// Where row `row` (a multiple of 16) starts in tile_acts_i8's layout: from
// there the rows after it are a layout of their own.
size_t i8_tiles_offset(int64_t n_in, int64_t row);
void tile_acts_i8(const void* xq, int64_t n_in, int64_t n_batch, void* dst);

// y[b * y_stride + o] for o in [o_begin, o_end) and b in [0, n_batch); o_begin a
// multiple of 16, o_end a multiple of 16 or n_out. tiles: tile_acts_i8's
// layout of the same rows, or nullptr. Thread-safe.
void matmul_i8(const void* wi8, int64_t n_in, int64_t n_out, const void* xq, const void* tiles, int64_t n_batch,
               float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, WeightBits bits = WeightBits::Int8);
// "amx-int8", "avx512-vnni" or "scalar": what matmul_i8 runs now (from 8 rows
// with AMX tiles; fewer on AVX-512 VNNI where the CPU has it).
const char* matmul_i8_impl();

// ---- the ISA files' entry points; not an interface --------------------------------
namespace matmul_detail {
// One chunk (n <= 256 values) into q[0, 256), zeros past n; returns its scale
// (quantize_chunk_i8's bits).
float i8_quantize_chunk_avx512(const float* x, int64_t n, uint8_t* q);
void i8_run_avx512(const uint8_t* wi8, int64_t n_in, const uint8_t* xq, int64_t n_batch, float* y, int64_t y_stride,
                   int64_t o_begin, int64_t o_end, int64_t n_out, WeightBits bits);
void i8_tile_pack(const uint8_t* xq, int64_t n_in, int64_t n_batch, uint8_t* dst);
size_t i8_tile_bytes(int64_t n_in);  // one tile of 16 rows
// A chunk of a block of int4 rows (u[16][128]) to int8 rows of 256 values at
// dst (64-byte aligned, 4096 bytes): value j of row r from byte j % 128's low
// (j < 128) or high nibble, q = u - 8.
void i4_unpack(const uint8_t* blk, uint8_t* dst);
// ref::quantize_chunk_i4 with AVX-512, bit for bit (the repack's quantizer).
float i4_quantize_avx512(const float* x, int64_t n, int8_t* q);
// emulate: the tile instructions computed in plain C++ (tests on CPUs without AMX).
void i8_run_amx(const uint8_t* wi8, int64_t n_in, const uint8_t* tiles, int64_t n_batch, float* y, int64_t y_stride,
                int64_t o_begin, int64_t o_end, int64_t n_out, bool emulate, WeightBits bits = WeightBits::Int8);
}  // namespace matmul_detail

}  // namespace kt::cpu
