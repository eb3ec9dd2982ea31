// matmul_i8 (matmul_i8.h): the layout, the repacking, the portable kernel and
// the choice of kernel. The AVX-512 VNNI kernel and the activations' vector
// quantizer are in matmul_i8_avx512.cpp, the AMX tiles in matmul_i8_amx.cpp.
#include "kernels/cpu/matmul_i8.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/vec_f32.h"

namespace kt::cpu {

using ref::quantize_chunk_i8;

int64_t i8_chunks(int64_t n_in) { return (n_in + kI8Chunk - 1) / kI8Chunk; }
int64_t i8_row_blocks(int64_t n_out) { return (n_out + 15) / 16; }
size_t i8_matrix_bytes(int64_t n_in, int64_t n_out, WeightBits bits) {
  return size_t(i8_row_blocks(n_out)) * size_t(i8_chunks(n_in)) * i8_block_bytes(bits);
}

namespace {

// Int4: each row decoded, then each chunk quantized by the reference
// (ref::quantize_chunk_i4) and stored as q + 8, two values a byte.
void repack_i4_rows(GgmlType type, const void* w, uint64_t w_row_bytes, int64_t n_in, int64_t rows, void* dst) {
  const int64_t nc = i8_chunks(n_in);
  std::vector<float> row(static_cast<size_t>(n_in));
  int8_t q[256];
  const bool vector = active_isa() >= Isa::Avx512;
  for (int64_t rb = 0; rb < i8_row_blocks(rows); ++rb) {
    constexpr size_t kScales = i8_scales_offset(WeightBits::Int4);
    uint8_t* blocks = static_cast<uint8_t*>(dst) + size_t(rb * nc) * kI4BlockBytes;
    for (int64_t c = 0; c < nc; ++c) {  // zero values (8) and zero scales and sums where no row is
      std::memset(blocks + size_t(c) * kI4BlockBytes, 0x88, kScales);
      std::memset(blocks + size_t(c) * kI4BlockBytes + kScales, 0, 128);
    }
    for (int r = 0; r < 16 && rb * 16 + r < rows; ++r) {
      kern::vec::dequant(type, static_cast<const uint8_t*>(w) + uint64_t(rb * 16 + r) * w_row_bytes, row.data(), n_in);
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t n = std::min<int64_t>(kI8Chunk, n_in - c * kI8Chunk);
        std::fill(q, q + 256, int8_t(0));
        const float d = vector ? matmul_detail::i4_quantize_avx512(row.data() + c * kI8Chunk, n, q)
                               : ref::quantize_chunk_i4(row.data() + c * kI8Chunk, n, q);
        uint8_t* b = blocks + size_t(c) * kI4BlockBytes;
        int32_t s = 0;
        for (int j = 0; j < 128; ++j) {
          b[r * 128 + j] = uint8_t((q[j] + 8) | ((q[j + 128] + 8) << 4));
          s += q[j] + q[j + 128];
        }
        std::memcpy(b + kScales + 4 * r, &d, 4);
        std::memcpy(b + kScales + 64 + 4 * r, &s, 4);
      }
    }
  }
}

}  // namespace

void repack_i8_rows(GgmlType type, const void* w, uint64_t w_row_bytes, int64_t n_in, int64_t rows, void* dst,
                    WeightBits bits) {
  if (bits == WeightBits::Int4) return repack_i4_rows(type, w, w_row_bytes, n_in, rows, dst);
  const int64_t nc = i8_chunks(n_in);
  // A row decoded (the reference decoders' floats, vector where the CPU has
  // them), then quantized as an activation row is: the same q and d.
  std::vector<float> row(static_cast<size_t>(n_in));
  std::vector<uint8_t> q(i8_act_row_bytes(n_in));
  for (int64_t rb = 0; rb < i8_row_blocks(rows); ++rb) {
    uint8_t* blocks = static_cast<uint8_t*>(dst) + size_t(rb * nc) * kI8BlockBytes;
    std::memset(blocks, 0, size_t(nc) * kI8BlockBytes);
    for (int r = 0; r < 16 && rb * 16 + r < rows; ++r) {
      kern::vec::dequant(type, static_cast<const uint8_t*>(w) + uint64_t(rb * 16 + r) * w_row_bytes, row.data(), n_in);
      quantize_acts_i8(row.data(), n_in, 1, n_in, q.data());
      const auto* d = reinterpret_cast<const float*>(q.data() + nc * 256);
      for (int64_t c = 0; c < nc; ++c) {
        uint8_t* b = blocks + size_t(c) * kI8BlockBytes;
        std::memcpy(b + r * 256, q.data() + c * 256, 256);
        int32_t s = 0;
        for (int i = 0; i < 256; ++i) s += int8_t(q[size_t(c * 256 + i)]);
        std::memcpy(b + 4096 + 4 * r, &d[c], 4);
        std::memcpy(b + 4096 + 64 + 4 * r, &s, 4);
      }
    }
  }
}

void repack_i8(GgmlType type, const void* w, uint64_t w_row_bytes, int64_t n_in, int64_t n_out, void* dst,
               int64_t rb_begin, int64_t rb_end, WeightBits bits) {
  const int64_t r0 = rb_begin * 16, r1 = std::min(n_out, rb_end * 16);
  if (r0 >= r1) return;
  repack_i8_rows(type, static_cast<const uint8_t*>(w) + uint64_t(r0) * w_row_bytes, w_row_bytes, n_in, r1 - r0,
                 static_cast<uint8_t*>(dst) + size_t(rb_begin * i8_chunks(n_in)) * i8_block_bytes(bits), bits);
}

void repack_i8_matrices(GgmlType type, const void* w, uint64_t w_row_bytes, uint64_t w_mat_bytes, int64_t n_in,
                        int64_t n_out, int64_t n_mat, void* dst, int n_threads, WeightBits bits) {
  // Items of (matrix, 16 blocks of 16 rows), taken from a counter.
  const int64_t nrb = i8_row_blocks(n_out), per = (nrb + 15) / 16, n_items = n_mat * per;
  const size_t mb = i8_matrix_bytes(n_in, n_out, bits);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n_items;) {
      const int64_t e = i / per, rb0 = i % per * 16;
      repack_i8(type, static_cast<const uint8_t*>(w) + uint64_t(e) * w_mat_bytes, w_row_bytes, n_in, n_out,
                static_cast<uint8_t*>(dst) + size_t(e) * mb, rb0, std::min(nrb, rb0 + 16), bits);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int64_t>(n_threads, n_items); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

size_t i8_act_row_bytes(int64_t n_in) {
  const int64_t nc = i8_chunks(n_in);
  return (size_t(nc) * 260 + 63) / 64 * 64;
}

void quantize_acts_i8(const float* x, int64_t x_stride, int64_t n_rows, int64_t n_in, void* dst) {
  const size_t rb = i8_act_row_bytes(n_in);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < i8_chunks(n_in); ++c)
      quantize_act_chunk_i8(x + r * x_stride + c * kI8Chunk, n_in, c, static_cast<uint8_t*>(dst) + size_t(r) * rb);
}

// One chunk as quantize_chunk_i8 rounds it (the vector form where the CPU has
// it, bit for bit), its scale, and with the last chunk the row's padding.
void quantize_act_chunk_i8(const float* x, int64_t n_in, int64_t c, void* xq) {
  auto* o = static_cast<uint8_t*>(xq);
  const int64_t nc = i8_chunks(n_in), n = std::min<int64_t>(kI8Chunk, n_in - c * kI8Chunk);
  float d;
  if (active_isa() >= Isa::Avx512) {
    d = matmul_detail::i8_quantize_chunk_avx512(x, n, o + c * 256);
  } else {
    std::memset(o + c * 256, 0, 256);
    d = quantize_chunk_i8(x, n, reinterpret_cast<int8_t*>(o) + c * 256);
  }
  std::memcpy(o + nc * 256 + 4 * c, &d, 4);
  if (c == nc - 1) std::memset(o + nc * 260, 0, i8_act_row_bytes(n_in) - size_t(nc) * 260);
}

size_t i8_tiles_bytes(int64_t n_in, int64_t n_batch) {
  if (active_isa() < Isa::Amx || n_batch < kI8TileMinBatch) return 0;
  return size_t((n_batch + 15) / 16) * matmul_detail::i8_tile_bytes(n_in);
}

size_t i8_tiles_offset(int64_t n_in, int64_t row) { return size_t(row / 16) * matmul_detail::i8_tile_bytes(n_in); }

void tile_acts_i8(const void* xq, int64_t n_in, int64_t n_batch, void* dst) {
  matmul_detail::i8_tile_pack(static_cast<const uint8_t*>(xq), n_in, n_batch, static_cast<uint8_t*>(dst));
}

namespace {

// Value k (of 256) of row r in a block of the given bits.
inline int32_t weight_value(const uint8_t* blk, int r, int k, WeightBits bits) {
  if (bits == WeightBits::Int8) return int8_t(blk[r * 256 + k]);
  const uint8_t u = blk[r * 128 + k % 128];
  return int32_t(k < 128 ? u & 15 : u >> 4) - 8;
}

// The portable kernel: integer sums per chunk, scaled in float.
void i8_run_scalar(const uint8_t* wi8, int64_t n_in, const uint8_t* xq, int64_t n_batch, float* y, int64_t y_stride,
                   int64_t o_begin, int64_t o_end, WeightBits bits) {
  const int64_t nc = i8_chunks(n_in);
  const size_t bb = i8_block_bytes(bits), q_bytes = i8_scales_offset(bits);
  const size_t arb = i8_act_row_bytes(n_in);
  for (int64_t b = 0; b < n_batch; ++b) {
    const auto* xb = reinterpret_cast<const int8_t*>(xq + size_t(b) * arb);
    const auto* xd = reinterpret_cast<const float*>(xq + size_t(b) * arb + nc * 256);
    for (int64_t o = o_begin; o < o_end; ++o) {
      const uint8_t* blocks = wi8 + size_t(o / 16 * nc) * bb;
      const int r = int(o % 16);
      float acc = 0.0f;
      for (int64_t c = 0; c < nc; ++c) {
        const uint8_t* blk = blocks + size_t(c) * bb;
        int32_t s = 0;
        for (int k = 0; k < 256; ++k) s += weight_value(blk, r, k, bits) * int32_t(xb[c * 256 + k]);
        float dw;
        std::memcpy(&dw, blk + q_bytes + 4 * r, 4);
        acc += float(s) * (dw * xd[c]);
      }
      y[b * y_stride + o] = acc;
    }
  }
}

}  // namespace

void matmul_i8(const void* wi8, int64_t n_in, int64_t n_out, const void* xq, const void* tiles, int64_t n_batch,
               float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, WeightBits bits) {
  const auto* w = static_cast<const uint8_t*>(wi8);
  const Isa isa = active_isa();
  if (isa >= Isa::Amx && n_batch >= kI8TileMinBatch) {
    if (tiles)
      return matmul_detail::i8_run_amx(w, n_in, static_cast<const uint8_t*>(tiles), n_batch, y, y_stride, o_begin,
                                       o_end, n_out, false, bits);
    // Not laid out by the caller: lay out here, 8 tiles of rows at a time.
    constexpr int64_t kGroup = 128;
    for (int64_t b0 = 0; b0 < n_batch; b0 += kGroup) {
      const int64_t nb = std::min(kGroup, n_batch - b0);
      std::vector<uint8_t> buf(size_t((nb + 15) / 16) * matmul_detail::i8_tile_bytes(n_in) + 64);
      auto* t = reinterpret_cast<uint8_t*>((uintptr_t(buf.data()) + 63) / 64 * 64);
      matmul_detail::i8_tile_pack(static_cast<const uint8_t*>(xq) + size_t(b0) * i8_act_row_bytes(n_in), n_in, nb, t);
      matmul_detail::i8_run_amx(w, n_in, t, nb, y + b0 * y_stride, y_stride, o_begin, o_end, n_out, false, bits);
    }
    return;
  }
  if (isa >= Isa::Avx512)
    return matmul_detail::i8_run_avx512(w, n_in, static_cast<const uint8_t*>(xq), n_batch, y, y_stride, o_begin,
                                        o_end, n_out, bits);
  i8_run_scalar(w, n_in, static_cast<const uint8_t*>(xq), n_batch, y, y_stride, o_begin, o_end, bits);
}

const char* matmul_i8_impl() {
  const Isa isa = active_isa();
  return isa >= Isa::Amx ? "amx-int8" : isa >= Isa::Avx512 ? "avx512-vnni" : "scalar";
}

}  // namespace kt::cpu
