// Dispatch for matmul_q (matmul_q.h), the activation quantizers every level
// shares, and the portable scalar path: integer dot products per block in plain
// C++, each block's result scaled in float and summed in double. The scalar path
// covers every supported type; the ISA files cover the common ones faster and
// fall back here for the rest.
#include "kernels/cpu/matmul_q.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/vec_dot_block.h"

namespace kt::cpu {

using namespace matmul_detail;

namespace matmul_detail {

ActKind act_kind(GgmlType t) {
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) return ActKind::Float;
  switch (vec_dot_block(t)) {
    case 32: return ActKind::Q8_0;
    case 256: return ActKind::Q8_K;
    default: return ActKind::None;
  }
}

}  // namespace matmul_detail

namespace {

size_t round64(size_t n) { return (n + 63) & ~size_t(63); }

// ---- activation quantizers (reference rounding, see ops_ref_basic.cpp) --------

// A rounded value as an int8: finite activations give [-127, 127] already; inf
// or NaN ones (whose products are NaN at any level) must not reach a float-to-int
// conversion out of range, which C++ leaves undefined.
int8_t to_int8(float v) {
  if (!(v >= -128.0f && v <= 127.0f)) return v > 0.0f ? int8_t(127) : int8_t(-128);
  return int8_t(v);
}

// ggml's quantize_row_q8_0_ref: scale amax / 127 stored as fp16; each value
// rounds half away from zero to an int8 multiple of the unrounded scale.
void quantize_row_q8_0(const float* x, int64_t n, uint8_t* dst) {
  const int64_t nb = n / 32;
  const auto [qs, dexp, qsum] = act_q8_0_rows(dst, n);
  for (int64_t k = 0; k < nb; ++k) {
    const float* xb = x + 32 * k;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float d16 = fp16_to_f32(f32_to_fp16(d));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = to_int8(std::round(xb[j] * id));
      sum += q;
      qs[32 * k + j] = uint8_t(q + 128);
    }
    for (int l = 0; l < 8; ++l) dexp[8 * k + l] = d16;
    qsum[k] = sum;
  }
}

// ggml's quantize_row_q8_K_ref: the value of largest magnitude (the first, on a
// tie) maps to -127; the others round to nearest even and clamp at 127.
void quantize_row_q8_k(GgmlType t, const float* x, int64_t n, uint8_t* dst) {
  const int64_t nb = n / 256;
  const auto [qs, bsumf, bsum, dd] = act_q8_k_rows(dst, n);
  const bool iq4xs = t == GgmlType::IQ4_XS;
  for (int64_t k = 0; k < nb; ++k) {
    const float* xb = x + 256 * k;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    int8_t q[256];
    float d = 0.0f;
    if (amax == 0.0f) {
      std::memset(q, 0, sizeof(q));
    } else {
      const float iscale = -127.0f / max;
      d = 1.0f / iscale;
      for (int j = 0; j < 256; ++j) q[j] = to_int8(std::min(127.0f, std::nearbyint(iscale * xb[j])));
    }
    for (int t16 = 0; t16 < 16; ++t16) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += q[16 * t16 + j];
      bsum[16 * k + t16] = int16_t(s);
      bsumf[16 * k + t16] = d * float(s);
    }
    int8_t* out = qs + 256 * k;
    if (iq4xs) {
      for (int v = 0; v < 256; ++v) out[iq4xs_act_pos(v)] = q[v];
    } else {
      std::memcpy(out, q, 256);
    }
    dd[k] = d;
  }
}

void quantize_row_float(GgmlType t, const float* x, int64_t n, uint8_t* dst) {
  float* out = reinterpret_cast<float*>(dst);
  if (t == GgmlType::F32) {
    std::memcpy(out, x, size_t(n) * sizeof(float));
  } else if (t == GgmlType::F16) {
    for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  }
}

// ---- scalar kernels: one weight block against one activation row -------------
// Each returns the block's contribution in float: integer sums per (sub-)block,
// exact, times the float scales.

int q4_0_weight(const uint8_t* qs, int j) {  // value j of a Q4_0/Q4_1/IQ4_NL block, 0..15
  return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}
int q5_high(const uint8_t qh[4], int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return int((h >> j) & 1) << 4;
}

float dot_q4_0(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockQ4_0 b = load_block<BlockQ4_0>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += (q4_0_weight(b.qs, j) - 8) * (int(aq[j]) - 128);
  return fp16_to_f32(b.d) * a.dexp[8 * k] * float(s);
}

float dot_q4_1(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockQ4_1 b = load_block<BlockQ4_1>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += q4_0_weight(b.qs, j) * (int(aq[j]) - 128);
  const float da = a.dexp[8 * k];
  return fp16_to_f32(b.d) * da * float(s) + fp16_to_f32(b.m) * da * float(a.qsum[k]);
}

float dot_q5_0(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockQ5_0 b = load_block<BlockQ5_0>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j)
    s += ((q4_0_weight(b.qs, j) | q5_high(b.qh, j)) - 16) * (int(aq[j]) - 128);
  return fp16_to_f32(b.d) * a.dexp[8 * k] * float(s);
}

float dot_q5_1(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockQ5_1 b = load_block<BlockQ5_1>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += (q4_0_weight(b.qs, j) | q5_high(b.qh, j)) * (int(aq[j]) - 128);
  const float da = a.dexp[8 * k];
  return fp16_to_f32(b.d) * da * float(s) + fp16_to_f32(b.m) * da * float(a.qsum[k]);
}

float dot_q8_0(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockQ8_0 b = load_block<BlockQ8_0>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += int(b.qs[j]) * (int(aq[j]) - 128);
  return fp16_to_f32(b.d) * a.dexp[8 * k] * float(s);
}

float dot_iq4_nl(const uint8_t* wb, const ActQ8_0View& a, int64_t k) {
  const BlockIq4_nl b = load_block<BlockIq4_nl>(wb, 0);
  const uint8_t* aq = a.qs + 32 * k;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += kValuesIq4nl[q4_0_weight(b.qs, j)] * (int(aq[j]) - 128);
  return fp16_to_f32(b.d) * a.dexp[8 * k] * float(s);
}

int q2_bits(const uint8_t* qs, int v) {  // Q2_K/Q3_K low bits of value v
  const int half = v / 128, kk = (v % 128) / 32, l = v % 32;
  return (qs[32 * half + l] >> (2 * kk)) & 3;
}

int q4k_nibble(const uint8_t* qs, int v) {  // Q4_K/Q5_K low 4 bits of value v
  const uint8_t byte = qs[32 * (v / 64) + v % 32];
  return (v % 64) < 32 ? (byte & 0xF) : (byte >> 4);
}

float dot_q2_k(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockQ2_K b = load_block<BlockQ2_K>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0, mins = 0;
  for (int t = 0; t < 16; ++t) {
    int32_t s = 0;
    for (int v = 16 * t; v < 16 * t + 16; ++v) s += q2_bits(b.qs, v) * aq[v];
    main += (b.scales[t] & 0xF) * s;
    mins += (b.scales[t] >> 4) * a.bsum[16 * k + t];
  }
  const float d = a.d[k];
  return fp16_to_f32(b.d) * d * float(main) - fp16_to_f32(b.dmin) * d * float(mins);
}

float dot_q3_k(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockQ3_K b = load_block<BlockQ3_K>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0;
  for (int t = 0; t < 16; ++t) {
    const int lo = t < 8 ? (b.scales[t] & 0xF) : (b.scales[t - 8] >> 4);
    const int hi = (b.scales[8 + t % 4] >> (2 * (t / 4))) & 3;
    const int sc = (lo | hi << 4) - 32;
    int32_t s = 0;
    for (int v = 16 * t; v < 16 * t + 16; ++v) {
      const bool high = (b.hmask[v % 32] >> (v / 32)) & 1;
      s += (q2_bits(b.qs, v) - (high ? 0 : 4)) * aq[v];
    }
    main += sc * s;
  }
  return fp16_to_f32(b.d) * a.d[k] * float(main);
}

float dot_q4_k(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockQ4_K b = load_block<BlockQ4_K>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0, mins = 0;
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(b.scales, s, &sc, &m);
    int32_t sum = 0;
    for (int v = 32 * s; v < 32 * s + 32; ++v) sum += q4k_nibble(b.qs, v) * aq[v];
    main += sc * sum;
    mins += m * (a.bsum[16 * k + 2 * s] + a.bsum[16 * k + 2 * s + 1]);
  }
  const float d = a.d[k];
  return fp16_to_f32(b.d) * d * float(main) - fp16_to_f32(b.dmin) * d * float(mins);
}

float dot_q5_k(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockQ5_K b = load_block<BlockQ5_K>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0, mins = 0;
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(b.scales, s, &sc, &m);
    int32_t sum = 0;
    for (int v = 32 * s; v < 32 * s + 32; ++v)
      sum += (q4k_nibble(b.qs, v) + (((b.qh[v % 32] >> s) & 1) << 4)) * aq[v];
    main += sc * sum;
    mins += m * (a.bsum[16 * k + 2 * s] + a.bsum[16 * k + 2 * s + 1]);
  }
  const float d = a.d[k];
  return fp16_to_f32(b.d) * d * float(main) - fp16_to_f32(b.dmin) * d * float(mins);
}

float dot_q6_k(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockQ6_K b = load_block<BlockQ6_K>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0;
  for (int t = 0; t < 16; ++t) {
    int32_t s = 0;
    for (int v = 16 * t; v < 16 * t + 16; ++v) {
      const int half = v / 128, kk = (v % 128) / 32, l = v % 32;
      const uint8_t lo_byte = b.ql[64 * half + l + 32 * (kk % 2)];
      const int lo = kk < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
      const int hi = (b.qh[32 * half + l] >> (2 * kk)) & 3;
      s += ((lo | hi << 4) - 32) * aq[v];
    }
    main += b.scales[t] * s;
  }
  return fp16_to_f32(b.d) * a.d[k] * float(main);
}

float dot_iq4_xs(const uint8_t* wb, const ActQ8_KView& a, int64_t k) {
  const BlockIq4_xs b = load_block<BlockIq4_xs>(wb, 0);
  const int8_t* aq = a.qs + 256 * k;
  int32_t main = 0;
  for (int s = 0; s < 8; ++s) {
    const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
    const int hi = (b.scales_h >> (2 * s)) & 3;
    int32_t sum = 0;
    for (int i = 0; i < 16; ++i) {
      const uint8_t byte = b.qs[16 * s + i];
      sum += kValuesIq4nl[byte & 0xF] * aq[iq4xs_act_pos(32 * s + i)];
      sum += kValuesIq4nl[byte >> 4] * aq[iq4xs_act_pos(32 * s + 16 + i)];
    }
    main += ((lo | hi << 4) - 32) * sum;
  }
  return fp16_to_f32(b.d) * a.d[k] * float(main);
}

template <class View, class Dot>
void scalar_blocks(const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, int block, size_t block_bytes,
                   const uint8_t* xq, size_t act_bytes, int64_t n_batch, float* y, int64_t y_stride,
                   int64_t o_begin, int64_t o_end, View (*view)(const void*, int64_t), Dot dot) {
  const int64_t nb = n_in / block;
  for (int64_t b = 0; b < n_batch; ++b) {
    const View a = view(xq + size_t(b) * act_bytes, n_in);
    for (int64_t o = o_begin; o < o_end; ++o) {
      const uint8_t* row = w + uint64_t(o) * w_row_bytes;
      double sum = 0.0;
      for (int64_t k = 0; k < nb; ++k) sum += double(dot(row + size_t(k) * block_bytes, a, k));
      y[b * y_stride + o] = float(sum);
    }
  }
}

float load_weight(GgmlType t, const uint8_t* row, int64_t i) {
  if (t == GgmlType::F32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * i, 2);
  return t == GgmlType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

void scalar_float(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* xq,
                  size_t act_bytes, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin,
                  int64_t o_end) {
  for (int64_t b = 0; b < n_batch; ++b) {
    const float* x = reinterpret_cast<const float*>(xq + size_t(b) * act_bytes);
    for (int64_t o = o_begin; o < o_end; ++o) {
      const uint8_t* row = w + uint64_t(o) * w_row_bytes;
      double sum = 0.0;
      for (int64_t i = 0; i < n_in; ++i) sum += double(load_weight(t, row, i)) * double(x[i]);
      y[b * y_stride + o] = float(sum);
    }
  }
}

void matmul_scalar(GgmlType t, const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab,
                   int64_t nbt, float* y, int64_t ys, int64_t o0, int64_t o1) {
  const size_t bb = type_traits(t).type_size;
  auto q80 = [&](auto dot) { scalar_blocks(w, wr, n, 32, bb, xq, ab, nbt, y, ys, o0, o1, act_q8_0, dot); };
  auto q8k = [&](auto dot) { scalar_blocks(w, wr, n, 256, bb, xq, ab, nbt, y, ys, o0, o1, act_q8_k, dot); };
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
      return scalar_float(t, w, wr, n, xq, ab, nbt, y, ys, o0, o1);
    case GgmlType::Q4_0: return q80(dot_q4_0);
    case GgmlType::Q4_1: return q80(dot_q4_1);
    case GgmlType::Q5_0: return q80(dot_q5_0);
    case GgmlType::Q5_1: return q80(dot_q5_1);
    case GgmlType::Q8_0: return q80(dot_q8_0);
    case GgmlType::IQ4_NL: return q80(dot_iq4_nl);
    case GgmlType::Q2_K: return q8k(dot_q2_k);
    case GgmlType::Q3_K: return q8k(dot_q3_k);
    case GgmlType::Q4_K: return q8k(dot_q4_k);
    case GgmlType::Q5_K: return q8k(dot_q5_k);
    case GgmlType::Q6_K: return q8k(dot_q6_k);
    case GgmlType::IQ4_XS: return q8k(dot_iq4_xs);
    default: std::abort();
  }
}

// A caller passing a type matmul_q does not take, or a row length that is not a
// whole number of blocks, has a bug the kernels cannot survive.
void check(GgmlType t, int64_t n_in) {
  if (!matmul_q_supported(t) || n_in < 0 || n_in % type_traits(t).block_size != 0) std::abort();
}

}  // namespace

bool matmul_q_supported(GgmlType t) { return act_kind(t) != ActKind::None; }

const char* matmul_q_impl(GgmlType t) {
  if (!matmul_q_supported(t)) return "unsupported";
  const Isa isa = active_isa();
  if (isa >= Isa::Amx && matmul_q_amx_covers(t)) return "amx-int8";  // from kAmxMinBatch rows; VNNI below
  if (isa >= Isa::Avx512 && matmul_q_avx512_covers(t)) return "avx512-vnni";
  if (isa >= Isa::Avx2 && matmul_q_avx2_covers(t)) return "avx2";
  return "scalar";
}

size_t act_row_bytes(GgmlType t, int64_t n) {
  check(t, n);
  return round64(act_payload_bytes(act_kind(t), n));
}

void quantize_acts(GgmlType t, const float* x, int64_t x_stride, int64_t n_rows, int64_t n_in, void* dst) {
  const size_t ab = act_row_bytes(t, n_in);
  auto* out = static_cast<uint8_t*>(dst);
  if (active_isa() >= Isa::Avx512 && quantize_acts_avx512(t, x, x_stride, n_rows, n_in, out, ab)) return;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * x_stride;
    uint8_t* o = out + size_t(r) * ab;
    switch (act_kind(t)) {
      case ActKind::Float: quantize_row_float(t, xr, n_in, o); break;
      case ActKind::Q8_0: quantize_row_q8_0(xr, n_in, o); break;
      case ActKind::Q8_K: quantize_row_q8_k(t, xr, n_in, o); break;
      default: std::abort();
    }
    // The padding too, so rows are fully defined bytes (hashable, comparable).
    const size_t used = act_payload_bytes(act_kind(t), n_in);
    std::memset(o + used, 0, ab - used);
  }
}

void dequantize_acts(GgmlType t, const void* xq_row, int64_t n, float* x) {
  check(t, n);
  switch (act_kind(t)) {
    case ActKind::Float:
      std::memcpy(x, xq_row, size_t(n) * 4);
      return;
    case ActKind::Q8_0: {
      const ActQ8_0View a = act_q8_0(xq_row, n);
      for (int64_t i = 0; i < n; ++i) x[i] = a.dexp[8 * (i / 32)] * float(int(a.qs[i]) - 128);
      return;
    }
    case ActKind::Q8_K: {
      const ActQ8_KView a = act_q8_k(xq_row, n);
      const bool iq4xs = t == GgmlType::IQ4_XS;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = i / 256;
        const int v = int(i % 256);
        x[i] = a.d[k] * float(a.qs[256 * k + (iq4xs ? iq4xs_act_pos(v) : v)]);
      }
      return;
    }
    default:
      std::abort();
  }
}

void matmul_q(GgmlType t, const void* w, uint64_t w_row_bytes, int64_t n_in, const void* xq,
              int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end) {
  const size_t ab = act_row_bytes(t, n_in);
  if (o_begin >= o_end || n_batch <= 0) return;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  const Isa isa = active_isa();
  if (isa >= Isa::Amx && n_batch >= kAmxMinBatch &&
      matmul_q_amx(t, wb, w_row_bytes, n_in, xb, ab, n_batch, y, y_stride, o_begin, o_end, false))
    return;
  if (isa >= Isa::Avx512 &&
      matmul_q_avx512(t, wb, w_row_bytes, n_in, xb, ab, n_batch, y, y_stride, o_begin, o_end))
    return;
  if (isa >= Isa::Avx2 &&
      matmul_q_avx2(t, wb, w_row_bytes, n_in, xb, ab, n_batch, y, y_stride, o_begin, o_end))
    return;
  matmul_scalar(t, wb, w_row_bytes, n_in, xb, ab, n_batch, y, y_stride, o_begin, o_end);
}

size_t tiled_acts_bytes(GgmlType t, int64_t n_in, int64_t n_batch) {
  if (active_isa() < Isa::Amx || n_batch < kAmxMinBatch) return 0;
  return matmul_detail::amx_tiles_bytes(t, n_in, n_batch);
}

void tile_acts(GgmlType t, const void* xq, int64_t n_in, int64_t n_batch, void* dst) {
  matmul_detail::amx_pack_tiles(t, static_cast<const uint8_t*>(xq), act_row_bytes(t, n_in), n_in, n_batch,
                                static_cast<uint8_t*>(dst));
}

void matmul_q_tiled(GgmlType t, const void* w, uint64_t w_row_bytes, int64_t n_in, const void* tiles,
                    int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end) {
  if (o_begin >= o_end || n_batch <= 0) return;
  matmul_detail::matmul_q_amx_tiles(t, static_cast<const uint8_t*>(w), w_row_bytes, n_in,
                                    static_cast<const uint8_t*>(tiles), n_batch, y, y_stride, o_begin, o_end,
                                    false);
}

}  // namespace kt::cpu
