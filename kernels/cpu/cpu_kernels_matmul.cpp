// cpu.matmul — out[0] [rows][n_out] = in[0] [rows][n_in] W^T (+ bias), W =
// weights[0] (ggml [n_in, n_out], any type with kernels), bias = weights[1]
// (F32 [n_out]) when present.
//
// Reference path: each activation row is rounded as ggml's CPU backend rounds
// it for W's type (CallSpec::rounding, ops_ref.h round_activations), then the
// type table's dot_row gives each output; output rows are split over threads.
// Fast path (matmul_q.h, chosen by the CPU's features): the activation rows
// are quantized once to W's vec_dot type, then blocks of output rows are
// integer dot products, taken by the threads one block at a time. The same
// numbers as the reference with GgmlCpu rounding, up to float summation.
// Param bf16_rows (> 0; KTransformers' AMXBF16 on a CPU plan): a step of at
// least that many rows computes in BF16 instead (matmul_bf16.h; the reference:
// ActRounding::Bf16), so prefill's long steps take the BF16 tiles and decode
// keeps ggml's rounding.
// Param int8_rows (> 0; KTransformers' AMXInt8 on a linear layer): the same,
// with a step of at least that many rows in int8 (matmul_i8.h): each block of
// W's rows is requantized to int8 per call, in a buffer of the thread's own
// (no copy of W is kept), and multiplied by the AMX-INT8 tiles (the reference:
// ActRounding::Int8). Requantizing costs per weight, the tiles per weight and
// row, so it pays on prefill's long steps.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_i8.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/work_split.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

ref::ActRounding act_rounding(Rounding r) {
  return r == Rounding::GgmlCpu ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
}

// y[r][o] += bias[o] for rows [0, rows) and o in [o0, o1).
void add_bias(const Act& y, const float* bias, int64_t rows, int64_t o0, int64_t o1) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = o0; o < o1; ++o) y.row(r)[o] += bias[o];
}

class MatmulRef final : public Kernel {
 public:
  MatmulRef(ref::ActRounding rounding, int64_t bf16_rows, int64_t int8_rows)
      : rounding_(rounding), bf16_rows_(bf16_rows), int8_rows_(int8_rows) {}

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &y = a.out[0];
    const WeightView& w = a.weights[0];
    const float* bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    const int64_t n_in = w.ne[0], n_out = w.ne[1];
    const bool bf16 = bf16_rows_ > 0 && x.rows >= bf16_rows_, int8 = int8_rows_ > 0 && x.rows >= int8_rows_;
    if (bf16 || int8) {
      ref::matmul(w.type, w.data, n_in, n_out, x.row(0), x.rows, y.f32(),
                  bf16 ? ref::ActRounding::Bf16 : ref::ActRounding::Int8);
      if (bias) add_bias(y, bias, x.rows, 0, n_out);
      return;
    }
    xr_.resize(size_t(x.rows * n_in));
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r)
        ref::round_activations(w.type, rounding_, x.row(r), n_in, &xr_[size_t(r * n_in)]);
    });
    const TypeTraits& t = type_traits(w.type);
    a.par->for_range(n_out, [&](int64_t b, int64_t e, int) {
      for (int64_t o = b; o < e; ++o) {
        const uint8_t* row = w.row(o);
        for (int64_t r = 0; r < x.rows; ++r) {
          float v = float(t.dot_row(row, &xr_[size_t(r * n_in)], n_in));
          if (bias) v += bias[o];
          y.row(r)[o] = v;
        }
      }
    });
  }

 private:
  ref::ActRounding rounding_;
  int64_t bf16_rows_, int8_rows_;
  std::vector<float> xr_;  // the rounded activations of one call
};

class MatmulFast final : public Kernel {
 public:
  MatmulFast(GgmlType type, int64_t bf16_rows, int64_t int8_rows)
      : impl_(fast_matmul_impl(type, bf16_rows) + (int8_rows > 0 ? std::string("+int8 ") + cpu::matmul_i8_impl() : "")),
        bf16_rows_(bf16_rows),
        int8_rows_(int8_rows) {}
  std::string_view impl() const override { return impl_; }

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &y = a.out[0];
    const WeightView& w = a.weights[0];
    const float* bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    const int64_t n_in = w.ne[0], n_out = w.ne[1], rows = x.rows;
    const bool par = worth_threads(rows * n_in * n_out);
    if (bf16_rows_ > 0 && rows >= bf16_rows_) return run_bf16(a, par);
    if (int8_rows_ > 0 && rows >= int8_rows_) return run_int8(a, par);
    const size_t arb = cpu::act_row_bytes(w.type, n_in);
    auto* xq = static_cast<uint8_t*>(scratch(0, size_t(rows) * arb));
    for_each_item(*a.par, rows, par && rows > 1, [&](int64_t r, int) {
      cpu::quantize_acts(w.type, x.row(r), n_in, 1, n_in, xq + size_t(r) * arb);
    });
    // Blocks of output rows: enough for every thread to take several.
    const int64_t block = std::max<int64_t>(16, std::min<int64_t>(256, n_out / (4 * a.par->n_threads()) / 16 * 16));
    const int64_t n_blocks = (n_out + block - 1) / block;
    for_each_item(*a.par, n_blocks, par, [&](int64_t i, int) {
      const int64_t o0 = i * block, o1 = std::min(n_out, o0 + block);
      cpu::matmul_q(w.type, w.data, w.row_bytes(), n_in, xq, rows, y.f32(), n_out, o0, o1);
      if (bias) add_bias(y, bias, rows, o0, o1);
    });
  }

 private:
  // The rows packed as BF16 tiles (16 rows each, taken by the threads), then
  // blocks of whole 32-row panels of W.
  void run_bf16(const CallArgs& a, bool par) {
    const Act &x = a.in[0], &y = a.out[0];
    const WeightView& w = a.weights[0];
    const float* bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    const int64_t n_in = w.ne[0], n_out = w.ne[1], rows = x.rows;
    const size_t tile = cpu::bf16_acts_bytes(n_in, 16);
    auto* acts = static_cast<uint8_t*>(scratch(0, cpu::bf16_acts_bytes(n_in, rows)));
    for_each_item(*a.par, (rows + 15) / 16, par, [&](int64_t i, int) {
      cpu::pack_bf16_acts(x.row(16 * i), x.cols, n_in, std::min<int64_t>(16, rows - 16 * i), acts + size_t(i) * tile);
    });
    const int64_t block = std::max<int64_t>(32, std::min<int64_t>(256, n_out / (4 * a.par->n_threads()) / 32 * 32));
    for_each_item(*a.par, (n_out + block - 1) / block, par, [&](int64_t i, int) {
      const int64_t o0 = i * block, o1 = std::min(n_out, o0 + block);
      cpu::matmul_bf16(w.type, w.data, w.row_bytes(), n_in, acts, rows, y.f32(), n_out, o0, o1);
      if (bias) add_bias(y, bias, rows, o0, o1);
    });
  }

  // The rows quantized to int8 chunks (and with AMX laid out once as the
  // tiles' activations), then blocks of 64 rows of W, each requantized into
  // the thread's own buffer and multiplied.
  void run_int8(const CallArgs& a, bool par) {
    const Act &x = a.in[0], &y = a.out[0];
    const WeightView& w = a.weights[0];
    const float* bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    const int64_t n_in = w.ne[0], n_out = w.ne[1], rows = x.rows;
    const size_t arb = cpu::i8_act_row_bytes(n_in);
    auto* xq = static_cast<uint8_t*>(scratch(0, size_t(rows) * arb));
    for_each_item(*a.par, rows, par, [&](int64_t r, int) {
      cpu::quantize_acts_i8(x.row(r), n_in, 1, n_in, xq + size_t(r) * arb);
    });
    const size_t tiles_bytes = cpu::i8_tiles_bytes(n_in, rows);
    auto* tiles = tiles_bytes ? static_cast<uint8_t*>(scratch(1, tiles_bytes)) : nullptr;
    if (tiles) {
      const size_t tb = tiles_bytes / size_t((rows + 15) / 16);
      for_each_item(*a.par, (rows + 15) / 16, par, [&](int64_t i, int) {
        const int64_t n = std::min<int64_t>(16, rows - 16 * i);
        cpu::tile_acts_i8(xq + size_t(16 * i) * arb, n_in, n, tiles + size_t(i) * tb);
      });
    }
    constexpr int64_t kBlock = 64;
    for_each_item(*a.par, (n_out + kBlock - 1) / kBlock, par, [&](int64_t i, int) {
      const int64_t o0 = i * kBlock, n = std::min(kBlock, n_out - o0);
      auto* wi8 = static_cast<uint8_t*>(scratch(9, cpu::i8_matrix_bytes(n_in, kBlock)));  // this thread's
      cpu::repack_i8_rows(w.type, w.row(o0), w.row_bytes(), n_in, n, wi8);
      cpu::matmul_i8(wi8, n_in, n, xq, tiles, rows, y.f32() + o0, n_out, 0, n);
      if (bias) add_bias(y, bias, rows, o0, o0 + n);
    });
  }

  std::string impl_;
  int64_t bf16_rows_, int8_rows_;
};

}  // namespace

// The fast path applies where it computes the reference's numbers: GgmlCpu
// rounding, a type matmul_q takes, a call not asking for the reference, and
// where the call has BF16 steps (bf16_rows > 0), a CPU matmul_bf16 runs on.
bool use_fast_matmul(const CallSpec& s, GgmlType type) {
  const Param* bf16 = s.find("bf16_rows");
  return s.impl == Impl::Fast && s.rounding == Rounding::GgmlCpu && cpu::matmul_q_supported(type) &&
         (!bf16 || bf16->i <= 0 || cpu::matmul_bf16_available(type));
}

std::string fast_matmul_impl(GgmlType type, int64_t bf16_rows) {
  std::string s = cpu::matmul_q_impl(type);
  if (bf16_rows > 0) s += std::string("+") + cpu::matmul_bf16_impl();
  return s;
}

std::unique_ptr<Kernel> make_cpu_matmul(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 1, 1, 2) || !b.weight_computable(0)) return nullptr;
  const WeightView& w = s.weights[0];
  b.weight_shape(0, s.in[0].cols, s.out[0].cols);
  b.in_type(0, GgmlType::F32);
  b.out_type(0, GgmlType::F32);
  if (s.weights.size() > 1) {
    b.check(s.weights[1].type == GgmlType::F32, "bias '", std::string(s.weights[1].name), "' must be F32");
    b.weight_shape(1, w.ne[1]);
  }
  const int64_t bf16_rows = b.i("bf16_rows", 0), int8_rows = b.i("int8_rows", 0);
  if (!b.check(bf16_rows >= 0 && int8_rows >= 0, "bf16_rows and int8_rows must be >= 0") ||
      !b.check(bf16_rows == 0 || int8_rows == 0, "bf16_rows and int8_rows exclude each other"))
    return nullptr;
  if (use_fast_matmul(s, w.type)) return b.done(std::make_unique<MatmulFast>(w.type, bf16_rows, int8_rows));
  return b.done(std::make_unique<MatmulRef>(act_rounding(s.rounding), bf16_rows, int8_rows));
}

}  // namespace kt::kern
