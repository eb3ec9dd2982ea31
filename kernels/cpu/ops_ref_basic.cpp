// Reference element-wise ops, norms, softmax and matrix products (ops_ref.h).
// Each mirrors the ggml op named beside it, computed in double where ggml
// accumulates (ggml_float), so it is at least as exact as llama.cpp's CPU path.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/ops_ref.h"

namespace kt::cpu::ref {

namespace {

// A type without reference kernels cannot reach these ops through the model
// loader (it checks supported()); reaching here with one is a caller bug.
const TypeTraits& computable(GgmlType type) {
  const TypeTraits& t = type_traits(type);
  if (!t.supported()) std::abort();
  return t;
}

// ggml's quantize_row_q8_0_ref and back: 32 values share the scale
// amax / 127, stored as fp16; each value rounds (half away from zero) to an
// int8 multiple of it.
void round_block_q8_0(float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float d16 = fp16_to_f32(f32_to_fp16(d));
  for (int j = 0; j < 32; ++j) x[j] = d16 * std::round(x[j] * id);
}

// ggml's quantize_row_q8_K_ref and back: 256 values share a float scale set by
// the value of largest magnitude (which becomes -127 exactly); others round to
// nearest (ties to even, ggml's nearest_int) and clamp at 127.
void round_block_q8_k(float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 256; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::fill(x, x + 256, 0.0f);
    return;
  }
  const float iscale = -127.0f / max;
  const float d = 1.0f / iscale;
  for (int j = 0; j < 256; ++j) {
    const float q = std::min(127.0f, std::nearbyint(iscale * x[j]));
    x[j] = d * q;
  }
}

}  // namespace

void get_rows(GgmlType type, const void* table, int64_t n_cols, const int32_t* ids,
              int64_t n_ids, float* out) {
  const TypeTraits& t = computable(type);
  const uint64_t row_bytes = t.row_bytes(n_cols);
  const auto* base = static_cast<const uint8_t*>(table);
  for (int64_t i = 0; i < n_ids; ++i)
    t.dequant_row(base + uint64_t(ids[i]) * row_bytes, out + i * n_cols, n_cols);
}

void rms_norm(const float* x, const float* w, int64_t n, int64_t n_rows, float eps, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += double(xr[i]) * double(xr[i]);
    rms_norm_apply(xr, w, n, sum_sq, eps, yr);
  }
}

void rms_norm_apply(const float* x, const float* w, int64_t n, double sum_sq, float eps, float* y) {
  const double inv_rms = 1.0 / std::sqrt(sum_sq / double(n) + double(eps));
  for (int64_t i = 0; i < n; ++i) {
    const double v = double(x[i]) * inv_rms;
    y[i] = float(w ? v * double(w[i]) : v);
  }
}

void add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_bias(float* x, const float* bias, int64_t n, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += bias[i];
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

float sigmoid(float x) { return float(1.0 / (1.0 + std::exp(-double(x)))); }

float silu(float x) { return float(double(x) / (1.0 + std::exp(-double(x)))); }

void sigmoid_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = sigmoid(x[i]);
}

void silu_glu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(double(silu(gate[i])) * double(up[i]));
}

void softmax(float* x, int64_t n, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* xr = x + r * n;
    float max_v = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max_v = std::fmax(max_v, xr[i]);
    std::vector<double> e(size_t(n), 0.0);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      e[size_t(i)] = std::exp(double(xr[i]) - double(max_v));
      sum += e[size_t(i)];
    }
    for (int64_t i = 0; i < n; ++i) xr[i] = float(e[size_t(i)] / sum);
  }
}

void round_to_f16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = fp16_to_f32(f32_to_fp16(x[i]));
}

float quantize_chunk_i8(const float* x, int64_t n, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  for (int64_t i = 0; i < n; ++i) q[i] = d == 0.0f ? int8_t(0) : int8_t(std::nearbyint(x[i] / d));
  return d;
}

namespace {

// The sum of f(i) over i < n in eight interleaved partial sums (lane i % 8)
// added in a fixed tree: defined bits, and eight chains at once rather than
// one (quantize_chunk_i4's sums run per chunk of every weight at load).
template <class F>
double lane_sum(int64_t n, F f) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += f(i + j);
  for (; i < n; ++i) acc[i % 8] += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

float quantize_chunk_i4(const float* x, int64_t n, int8_t* q) {
  float amax = 0.0f, big = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), big = x[i];
  if (amax == 0.0f) {
    std::fill(q, q + n, int8_t(0));
    return 0.0f;
  }
  // q for scale d, and its squared error. Nearest-even by adding and taking
  // off 1.5 * 2^23 (where a float's step is 1): nearbyint's value for |v| < 2^22,
  // which the clamp to [-9, 8] first ensures, without a call into libm per value
  // (with one, and one chain of double sums, V2-Lite's experts took 11-15 s to
  // repack on the device's 16 threads).
  float v[256];
  auto round_with = [&](float d, int8_t* out) {
    for (int64_t i = 0; i < n; ++i) {
      const float c = std::clamp(x[i] / d, -9.0f, 8.0f);
      v[i] = std::clamp((c + 12582912.0f) - 12582912.0f, -8.0f, 7.0f);
    }
    for (int64_t i = 0; i < n; ++i) out[i] = int8_t(v[i]);
    return lane_sum(n, [&](int64_t i) {
      const double e = double(x[i]) - double(v[i]) * double(d);
      return e * e;
    });
  };
  const float d0 = big / -8.0f;
  const double e0 = round_with(d0, q);
  const double xq = lane_sum(n, [&](int64_t i) { return double(x[i]) * double(q[i]); });
  const double qq = lane_sum(n, [&](int64_t i) { return double(q[i]) * double(q[i]); });
  const float d1 = float(xq / qq);  // qq > 0: the largest value's q is -8
  int8_t q1[256];
  const double e1 = round_with(d1, q1);
  if (!(e1 < e0)) return d0;
  std::copy(q1, q1 + n, q);
  return d1;
}

namespace {

// Values rounded chunk by chunk by a quantizer (quantize_chunk_i8 or _i4), as
// q * d in T: float for round_activations, exact doubles for matmul's sums.
// out may alias x (a chunk is quantized whole before it is written).
template <class T>
void chunk_values(float (*quantize)(const float*, int64_t, int8_t*), const float* x, int64_t n, T* out) {
  int8_t q[256];
  for (int64_t c = 0; c < n; c += 256) {
    const int64_t m = std::min<int64_t>(256, n - c);
    const float d = quantize(x + c, m, q);
    for (int64_t i = 0; i < m; ++i) out[c + i] = T(q[i]) * T(d);
  }
}

}  // namespace

void round_activations(GgmlType weight_type, ActRounding rounding, const float* x, int64_t n,
                       float* out) {
  if (out != x) std::copy(x, x + n, out);
  if (rounding == ActRounding::Exact) return;
  if (rounding == ActRounding::Bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(out[i]));
    return;
  }
  if (rounding == ActRounding::Int8 || rounding == ActRounding::Int4) return chunk_values(quantize_chunk_i8, out, n, out);
  switch (weight_type) {
    case GgmlType::F32:
      return;
    case GgmlType::F16:
      round_to_f16(out, n);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(out[i]));
      return;
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::IQ4_NL:
      // Q8_0 (Q8_1 rounds its values the same way).
      for (int64_t b = 0; b < n; b += 32) round_block_q8_0(out + b);
      return;
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      for (int64_t b = 0; b < n; b += 256) round_block_q8_k(out + b);
      return;
    default:
      std::abort();  // no reference kernels for this type: the loader rejects it
  }
}

void matmul(GgmlType type, const void* w, int64_t n_in, int64_t n_out, const float* x,
            int64_t n_batch, float* y, ActRounding rounding) {
  const TypeTraits& t = computable(type);
  const uint64_t row_bytes = t.row_bytes(n_in);
  const auto* base = static_cast<const uint8_t*>(w);
  std::vector<float> xr(static_cast<size_t>(n_in));
  if (rounding == ActRounding::Int8 || rounding == ActRounding::Int4) {  // weights and activations, per chunk of 256
    std::vector<double> wr(static_cast<size_t>(n_in * n_out)), xd(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
      t.dequant_row(base + uint64_t(o) * row_bytes, xr.data(), n_in);
      chunk_values(rounding == ActRounding::Int4 ? quantize_chunk_i4 : quantize_chunk_i8, xr.data(), n_in,
                   wr.data() + o * n_in);
    }
    for (int64_t b = 0; b < n_batch; ++b) {
      chunk_values(quantize_chunk_i8, x + b * n_in, n_in, xd.data());
      for (int64_t o = 0; o < n_out; ++o) {
        double s = 0.0;
        for (int64_t i = 0; i < n_in; ++i) s += wr[size_t(o * n_in + i)] * xd[size_t(i)];
        y[b * n_out + o] = float(s);
      }
    }
    return;
  }
  if (rounding == ActRounding::Bf16) {  // the weights rounded too: decode each row once
    std::vector<float> wr(static_cast<size_t>(n_in * n_out));
    for (int64_t o = 0; o < n_out; ++o) {
      float* r = wr.data() + o * n_in;
      t.dequant_row(base + uint64_t(o) * row_bytes, r, n_in);
      round_activations(type, ActRounding::Bf16, r, n_in, r);  // BF16 rounds any row alike
    }
    for (int64_t b = 0; b < n_batch; ++b) {
      round_activations(type, rounding, x + b * n_in, n_in, xr.data());
      for (int64_t o = 0; o < n_out; ++o) {
        double s = 0.0;
        for (int64_t i = 0; i < n_in; ++i) s += double(wr[size_t(o * n_in + i)]) * double(xr[size_t(i)]);
        y[b * n_out + o] = float(s);
      }
    }
    return;
  }
  for (int64_t b = 0; b < n_batch; ++b) {
    round_activations(type, rounding, x + b * n_in, n_in, xr.data());
    for (int64_t o = 0; o < n_out; ++o)
      y[b * n_out + o] = float(t.dot_row(base + uint64_t(o) * row_bytes, xr.data(), n_in));
  }
}

void ffn_swiglu(const FfnWeights& w, const float* x, int64_t n_tokens, float* out) {
  std::vector<float> gate(size_t(n_tokens * w.n_ff)), up(gate.size());
  matmul(w.gate_type, w.gate, w.n_embd, w.n_ff, x, n_tokens, gate.data(), w.rounding);
  matmul(w.up_type, w.up, w.n_embd, w.n_ff, x, n_tokens, up.data(), w.rounding);
  silu_glu(gate.data(), up.data(), int64_t(gate.size()), gate.data());
  matmul(w.down_type, w.down, w.n_ff, w.n_embd, gate.data(), n_tokens, out, w.rounding);
}

}  // namespace kt::cpu::ref
