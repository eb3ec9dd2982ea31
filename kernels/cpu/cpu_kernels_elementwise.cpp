// Row-wise CPU kernels: embedding lookup, RMSNorm, sums and gates, output row
// selection. Each splits its rows over the thread pool and calls the
// reference operator per chunk (they are memory-bound and already simple),
// except RMSNorm, whose sums of squares run eight rows side by side
// (rms_norm_rows); silu_mul, bound by its exponentials, splits its values.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/kernel_bind.h"
#include "kernels/norm_contract.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

// ref::rms_norm over rows [0, rows), eight rows at a time: each row's sum of
// squares is the reference's sequence of double additions, but eight of those
// chains run side by side (one chain waits out each addition's latency: a
// 2048-value row ~3.4 us, and a 512-token V2-Lite prefill's 53 add_rms_norm
// calls took 16 ms on the device's 16 cores). This file is built for baseline
// x86-64, like the reference, so each square is rounded before it is added:
// the same bits (RmsNorm.EightRowsAtATimeAreTheReference); the rest of each row
// is the reference's own (ref::rms_norm_apply).
void rms_norm_rows(const float* x, const float* w, int64_t n, int64_t rows, float eps, float* y) {
  constexpr int kRows = 8;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    const float* xr = x + r * n;
    double ss[kRows] = {};
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < kRows; ++k) {
        const double v = double(xr[k * n + i]);
        ss[k] += v * v;
      }
    for (int k = 0; k < kRows; ++k) ref::rms_norm_apply(xr + k * n, w, n, ss[k], eps, y + (r + k) * n);
  }
  if (r < rows) ref::rms_norm(x + r * n, w, n, rows - r, eps, y + r * n);
}

// cpu.embed — out[0] [tokens][n_embd] = rows step.tokens of weights[0] [n_embd, n_vocab].
class Embed final : public Kernel {
 public:
  void run(const CallArgs& a) override {
    const WeightView& w = a.weights[0];
    const Act& y = a.out[0];
    const int32_t* ids = a.step->tokens;
    a.par->for_range(y.rows, [&](int64_t b, int64_t e, int) {
      ref::get_rows(w.type, w.data, w.ne[0], ids + b, e - b, y.row(b));
    });
  }
};

// cpu.rms_norm — out[0] = rms_norm(in[0]) * weights[0], over groups of `group`
// columns (param group, default: the whole row; Qwen3's per-head q/k norms use
// the head dim). params: eps.
class RmsNorm final : public Kernel {
 public:
  RmsNorm(int64_t group, float eps) : group_(group), eps_(eps) {}
  void run(const CallArgs& a) override {
    const Act& x = a.in[0];
    const Act& y = a.out[0];
    const float* w = a.weights[0].f32();
    const int64_t per_row = x.cols / group_;
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      rms_norm_rows(x.row(b), w, group_, (e - b) * per_row, eps_, y.row(b));
    });
  }

 private:
  int64_t group_;
  float eps_;
};

// cpu.add_rms_norm — out[0] = in[0] + in[1], out[1] = rms_norm(out[0]) *
// weights[0] over whole rows: a residual sum and the norm that opens the next
// block, which kt-fuse-calls joins into one call (on a GPU, one launch less in
// the decode chain). params: eps. The same operations as cpu.add then
// cpu.rms_norm, so the same bits.
class AddRmsNorm final : public Kernel {
 public:
  explicit AddRmsNorm(float eps) : eps_(eps) {}
  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &z = a.in[1], &y = a.out[0], &h = a.out[1];
    const float* w = a.weights[0].f32();
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      ref::add(x.row(b), z.row(b), (e - b) * x.cols, y.row(b));
      rms_norm_rows(y.row(b), w, x.cols, e - b, eps_, h.row(b));
    });
  }

 private:
  float eps_;
};

// cpu.add — out[0] = in[0] + in[1].
class Add final : public Kernel {
 public:
  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &z = a.in[1], &y = a.out[0];
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      ref::add(x.row(b), z.row(b), (e - b) * x.cols, y.row(b));
    });
  }
};

// cpu.silu_mul — out[0] = silu(in[0]) * in[1]. Split over values, not rows:
// one decoding row of an FFN is thousands of exponentials (a single thread
// took 43 us for a shared expert's 2816 on the device's Xeon). Fast: in float
// with AVX-512 (vec::silu_mul, ~2 ulp); Reference: ref::silu_glu in double.
class SiluMul final : public Kernel {
 public:
  explicit SiluMul(bool fast) : fast_(fast) {}
  std::string_view impl() const override { return fast_ ? "vector" : "reference"; }
  void run(const CallArgs& a) override {
    const Act &g = a.in[0], &u = a.in[1], &y = a.out[0];
    const int64_t n = g.rows * g.cols;  // rows are contiguous
    constexpr int64_t kMinValues = 512;  // per part: the exponentials outweigh a wake-up
    const int64_t parts = std::clamp<int64_t>(n / kMinValues, 1, a.par->n_threads());
    a.par->for_range(parts, [&](int64_t b, int64_t e, int) {
      const int64_t lo = n * b / parts, hi = n * e / parts;
      if (fast_) vec::silu_mul(g.f32() + lo, u.f32() + lo, hi - lo, y.f32() + lo);
      else ref::silu_glu(g.f32() + lo, u.f32() + lo, hi - lo, y.f32() + lo);
    });
  }

 private:
  bool fast_;
};

// cpu.sigmoid_gate_add — out[0] = in[0] + sigmoid(in[2]) * in[1], in[2] one
// value per row (Qwen2-MoE scales its shared expert by sigmoid(x . w_gate)).
class SigmoidGateAdd final : public Kernel {
 public:
  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &s = a.in[1], &g = a.in[2], &y = a.out[0];
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) {
        const float gate = ref::sigmoid(g.row(r)[0]);
        const float* xr = x.row(r);
        const float* sr = s.row(r);
        float* yr = y.row(r);
        for (int64_t c = 0; c < x.cols; ++c) yr[c] = xr[c] + gate * sr[c];
      }
    });
  }
};

// cpu.select_rows — out[0] [outputs][cols] = rows step.outputs of in[0] [tokens][cols].
class SelectRows final : public Kernel {
 public:
  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &y = a.out[0];
    const size_t row_bytes = size_t(x.cols) * type_traits(x.type).type_size;
    for (int64_t r = 0; r < a.step->n_outputs; ++r)
      std::memmove(static_cast<uint8_t*>(y.data) + size_t(r) * row_bytes,
                   static_cast<const uint8_t*>(x.data) + size_t(a.step->outputs[r]) * row_bytes, row_bytes);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_embed(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (b.arity(0, 1, 1) && b.weight_computable(0)) {
    b.weight_shape(0, s.out[0].cols, -1);
    b.out_type(0, GgmlType::F32);
  }
  return b.done(std::make_unique<Embed>());
}

std::unique_ptr<Kernel> make_cpu_rms_norm(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  float eps = 0;
  int64_t group = 0;
  if (!bind_rms_norm(b, s, &eps, &group)) return nullptr;
  return b.done(std::make_unique<RmsNorm>(group, eps));
}

std::unique_ptr<Kernel> make_cpu_add_rms_norm(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  float eps = 0;
  if (!bind_add_rms_norm(b, s, &eps)) return nullptr;
  return b.done(std::make_unique<AddRmsNorm>(eps));
}

namespace {
// Same-shaped F32 operands: in[0..n_in) and out[0] all `cols` wide.
bool same_shapes(Binder& b, size_t n_in) {
  const CallSpec& s = b.spec();
  if (!b.arity(n_in, 1, 0)) return false;
  for (size_t k = 0; k < n_in; ++k) b.in_type(k, GgmlType::F32);
  return b.out_cols(0, s.in[0].cols);
}
}  // namespace

std::unique_ptr<Kernel> make_cpu_add(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 2)) b.in_cols(1, s.in[0].cols);
  return b.done(std::make_unique<Add>());
}

std::unique_ptr<Kernel> make_cpu_silu_mul(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 2)) b.in_cols(1, s.in[0].cols);
  return b.done(std::make_unique<SiluMul>(s.impl == Impl::Fast));
}

std::unique_ptr<Kernel> make_cpu_sigmoid_gate_add(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 3)) {
    b.in_cols(1, s.in[0].cols);
    b.in_cols(2, 1);
  }
  return b.done(std::make_unique<SigmoidGateAdd>());
}

std::unique_ptr<Kernel> make_cpu_select_rows(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (b.arity(1, 1, 0)) {
    b.out_cols(0, s.in[0].cols);
    b.out_type(0, s.in[0].type);
  }
  return b.done(std::make_unique<SelectRows>());
}

}  // namespace kt::kern
