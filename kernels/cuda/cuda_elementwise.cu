// Row-wise CUDA kernels: embedding lookup, RMSNorm, sums and gates, output
// row selection. Memory-bound and simple; they
// reproduce the reference's float operations (double where ops_ref_basic.cpp
// computes in double), so they match the CPU kernels to the last bit or two.
#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_rounded_rows.h"
#include "kernels/cuda/cuda_rounding.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/kernel_bind.h"
#include "kernels/norm_contract.h"

namespace kt::cuda {

namespace {

// Block (t, y): token t's values [y blockDim, (y + 1) blockDim), one a thread.
// (One block a token walking the row took one memory latency per 256 values,
// each step a new block of the table: V3's 7168-value Q4_K rows 14.7 us a
// decode token, ncu on an H200.)
template <GgmlType T>
__global__ void embed_rows(const uint8_t* __restrict__ table, uint64_t row_bytes, int64_t n,
                           const int32_t* __restrict__ tokens, float* __restrict__ out) {
  wait_for_inputs();
  const int64_t t = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= n) return;
  out[t * n + c] = deq1<T>(table + uint64_t(tokens[t]) * row_bytes, c);
}

// One block per group of n values: y = x / sqrt(mean(x^2) + eps) * w, the sum
// of squares in double as the reference takes it. A decode row is one block:
// its time is a chain of latencies, so each thread loads all its values (up to
// kNormRegs) and weights before the first sum, one memory latency instead of
// one per value (V2-Lite's 2048 values, ncu on an H200: 6.6 -> 3.0 us).
constexpr int kNormRegs = 8;

// One row of n values normalized by the block: out[i] = value(i) / rms * w[i]
// (w null: 1; times 1.0 is exact, so one expression serves both). sum, when
// not null, also gets value(i), and the second pass of a long row reads it
// back rather than calling value again (sum may be one of value's inputs).
template <class Value>
__device__ __forceinline__ void rms_norm_row(Value value, const float* __restrict__ w, int64_t n, float eps,
                                             float* sum, float* out, double* red) {
  const int64_t step = blockDim.x;
  if (n <= kNormRegs * step) {
    float v[kNormRegs], wv[kNormRegs];
    const double ss = load_values_sum_squares(value, w, n, v, wv, red);
    const double inv = 1.0 / sqrt(ss / double(n) + double(eps));
#pragma unroll
    for (int k = 0; k < kNormRegs; ++k) {
      const int64_t i = threadIdx.x + k * step;
      if (i < n) {
        if (sum) sum[i] = v[k];
        out[i] = float(double(v[k]) * inv * double(wv[k]));
      }
    }
    return;
  }
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += step) {
    const float v = value(i);
    if (sum) sum[i] = v;
    ss += double(v) * double(v);
  }
  ss = block_sum(ss, red);
  const double inv = 1.0 / sqrt(ss / double(n) + double(eps));
  for (int64_t i = threadIdx.x; i < n; i += step)
    out[i] = float(double(sum ? sum[i] : value(i)) * inv * (w ? double(w[i]) : 1.0));
}

__global__ void rms_norm_groups(const float* __restrict__ x, const float* __restrict__ w, int64_t n, float eps,
                                float* y) {
  __shared__ double red[32];
  if (w && threadIdx.x == 0) prefetch_l2(w, uint64_t(n) * 4);
  wait_for_inputs();
  const float* xg = x + int64_t(blockIdx.x) * n;
  rms_norm_row([xg](int64_t i) { return xg[i]; }, w, n, eps, nullptr, y + int64_t(blockIdx.x) * n, red);
}

// y = a + b and h = rms_norm(y) * w over rows of n values, one block a row:
// the residual sum and the norm opening the next block in one launch
// (kt-fuse-calls). The sum is add_kernel's (__fadd_rn) and the norm
// rms_norm_groups', with the threads norm_threads() gives both, so the bits
// are those of the two kernels.
// hq (not null): h's row also rounded to 8-bit blocks of `act` values
// (cuda_rounded_rows.h: hq [rows][n], hd [rows][n / act]) with quantize_q8's
// operations, read back from the row this block just wrote, so the products
// reading h need no rounding kernel.
// c (THREE): y = a + (b + c), the sum of a cuda.add of b and c and the
// residual's add (kt-fuse-calls: the routed and shared experts' outputs and
// the residual), the two adds' roundings in their order.
template <bool THREE>
__global__ void add_rms_norm_rows(const float* __restrict__ a, const float* __restrict__ b,
                                  const float* __restrict__ c, const float* __restrict__ w, int64_t n, float eps,
                                  float* __restrict__ y, float* __restrict__ h, int8_t* __restrict__ hq,
                                  float* __restrict__ hd, int act) {
  __shared__ double red[32];
  if (threadIdx.x == 0) prefetch_l2(w, uint64_t(n) * 4);
  wait_for_inputs();
  const int64_t off = int64_t(blockIdx.x) * n;
  a += off, b += off;
  if constexpr (THREE) {
    c += off;
    rms_norm_row([a, b, c](int64_t i) { return __fadd_rn(a[i], __fadd_rn(b[i], c[i])); }, w, n, eps, y + off, h + off,
                 red);
  } else {
    rms_norm_row([a, b](int64_t i) { return __fadd_rn(a[i], b[i]); }, w, n, eps, y + off, h + off, red);
  }
  if (!hq) return;
  __syncthreads();  // the row's values, written by every thread, visible to all
  const int64_t nb = n / act;
  for (int64_t k = threadIdx.x >> 5; k < nb; k += blockDim.x >> 5)
    round_block_q8_warp(h + off + k * act, act, hq + off + k * act, hd + int64_t(blockIdx.x) * nb + k);
}

// Threads for a block normalizing groups of `group` values: as few as keep a
// group in registers (kNormRegs a thread), at least 32-128 for small groups
// and 256 from 1024 values, at most 1024.
int norm_threads(int64_t group) {
  const int64_t base = group >= 1024 ? 256 : group >= 256 ? 128 : 32 * std::min<int64_t>(4, ceil_div(group, 32));
  return int(std::min<int64_t>(1024, std::max(base, 32 * ceil_div(group, 32 * kNormRegs))));
}

__device__ __forceinline__ float sigmoid_ref(float x) { return float(1.0 / (1.0 + exp(-double(x)))); }

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* y) {
  wait_for_inputs();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(a[i], b[i]);
}

__global__ void silu_mul_kernel(const float* g, const float* u, int64_t n, float* y) {
  wait_for_inputs();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = swiglu_value(g[i], u[i]);
}

__global__ void sigmoid_gate_add_kernel(const float* x, const float* s, const float* g, int64_t cols, int64_t n,
                                        float* y) {
  wait_for_inputs();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(x[i], __fmul_rn(sigmoid_ref(g[i / cols]), s[i]));
}

// Row outputs[r] of x to row r of y, 4-byte words; block (r, y) copies words
// [y blockDim, (y + 1) blockDim), one a thread (embed_rows' reason).
__global__ void select_rows_kernel(const uint32_t* __restrict__ x, const int32_t* __restrict__ outputs,
                                   int64_t words, uint32_t* __restrict__ y) {
  wait_for_inputs();
  const int64_t r = blockIdx.x, i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (i < words) y[r * words + i] = x[int64_t(outputs[r]) * words + i];
}

unsigned blocks_for(int64_t n, int threads) { return unsigned(ceil_div(n, threads)); }

}  // namespace

}  // namespace kt::cuda

namespace kt::kern {

namespace {

using cuda::blocks_for;

class Embed final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  explicit Embed(int device) : device_(device) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const WeightView& w = a.weights[0];
    const Act& y = a.out[0];
    if (y.rows == 0) return;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    auto s = static_cast<cudaStream_t>(a.queue);
    cuda::with_type(w.type, [&](auto tc) {
      constexpr GgmlType T = decltype(tc)::value;
      cuda::launch(cuda::embed_rows<T>, dim3(unsigned(y.rows), unsigned(cuda::ceil_div(y.cols, 256))), 256, 0, s,
                   w.bytes(), w.nb[1], y.cols, st.tokens, y.f32());
    });
    cuda::check_launch("cuda.embed", a.queue);
  }

 private:
  int device_;
};

class RmsNorm final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  RmsNorm(int device, int64_t group, float eps) : device_(device), group_(group), eps_(eps) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &x = a.in[0], &y = a.out[0];
    const int64_t groups = x.rows * (x.cols / group_);
    if (groups == 0) return;
    cuda::launch(cuda::rms_norm_groups, unsigned(groups), cuda::norm_threads(group_), 0,
                 static_cast<cudaStream_t>(a.queue), x.f32(), a.weights[0].f32(), group_, eps_, y.f32());
    cuda::check_launch("cuda.rms_norm", a.queue);
  }

 private:
  int device_;
  int64_t group_;
  float eps_;
};

class AddRmsNorm final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  AddRmsNorm(int device, float eps, int act) : device_(device), eps_(eps), act_(act) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act& x = a.in[0];
    if (x.rows == 0) return;
    int8_t* hq = act_ ? cuda::rounded_q(a.out[2].data) : nullptr;
    float* hd = act_ ? cuda::rounded_d(a.out[2].data, a.out[2].max_rows, x.cols) : nullptr;
    const bool three = a.in.size() == 3;
    cuda::launch(three ? cuda::add_rms_norm_rows<true> : cuda::add_rms_norm_rows<false>, unsigned(x.rows),
                 cuda::norm_threads(x.cols), 0, static_cast<cudaStream_t>(a.queue), x.f32(), a.in[1].f32(),
                 three ? a.in[2].f32() : nullptr, a.weights[0].f32(), x.cols, eps_, a.out[0].f32(), a.out[1].f32(), hq,
                 hd, act_);
    cuda::check_launch("cuda.add_rms_norm", a.queue);
  }

 private:
  int device_;
  float eps_;
  int act_;  // out[2]: h rounded to blocks of act_ values (0: no such output)
};

// add, silu_mul, sigmoid_gate_add: one thread per value.
class Elementwise final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  enum class Op { Add, SiluMul, SigmoidGateAdd };
  Elementwise(int device, Op op) : device_(device), op_(op) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act& x = a.in[0];
    const int64_t n = x.rows * x.cols;
    if (n == 0) return;
    auto s = static_cast<cudaStream_t>(a.queue);
    float* y = a.out[0].f32();
    switch (op_) {
      case Op::Add:
        cuda::launch(cuda::add_kernel, blocks_for(n, 256), 256, 0, s, x.f32(), a.in[1].f32(), n, y);
        break;
      case Op::SiluMul:
        cuda::launch(cuda::silu_mul_kernel, blocks_for(n, 256), 256, 0, s, x.f32(), a.in[1].f32(), n, y);
        break;
      case Op::SigmoidGateAdd:
        cuda::launch(cuda::sigmoid_gate_add_kernel, blocks_for(n, 256), 256, 0, s, x.f32(), a.in[1].f32(),
                     a.in[2].f32(), x.cols, n, y);
        break;
    }
    cuda::check_launch("cuda elementwise", a.queue);
  }

 private:
  int device_;
  Op op_;
};

class SelectRows final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  explicit SelectRows(int device) : device_(device) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &x = a.in[0], &y = a.out[0];
    if (a.step->n_outputs == 0) return;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    const int64_t words = x.cols * int64_t(type_traits(x.type).type_size) / 4;
    cuda::launch(cuda::select_rows_kernel, dim3(unsigned(a.step->n_outputs), unsigned(cuda::ceil_div(words, 256))), 256,
                 0, static_cast<cudaStream_t>(a.queue), static_cast<const uint32_t*>(x.data), st.outputs, words,
                 static_cast<uint32_t*>(y.data));
    cuda::check_launch("cuda.select_rows", a.queue);
  }

 private:
  int device_;
};

bool on_gpu(Binder& b) { return b.check(b.spec().device >= 0, "a CUDA kernel needs a GPU device"); }

bool same_shapes(Binder& b, size_t n_in) {
  const CallSpec& s = b.spec();
  if (!on_gpu(b) || !b.arity(n_in, 1, 0)) return false;
  for (size_t k = 0; k < n_in; ++k) b.in_type(k, GgmlType::F32);
  return b.out_cols(0, s.in[0].cols);
}

}  // namespace

std::unique_ptr<Kernel> make_cuda_embed(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (on_gpu(b) && b.arity(0, 1, 1)) {
    b.check(cuda::cuda_type(s.weights[0].type), "weight '", std::string(s.weights[0].name), "': type ",
            std::string(type_name(s.weights[0].type)), " has no CUDA kernels");
    b.weight_shape(0, s.out[0].cols, -1);
    b.out_type(0, GgmlType::F32);
  }
  return b.done(std::make_unique<Embed>(s.device));
}

std::unique_ptr<Kernel> make_cuda_rms_norm(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  float eps = 0;
  int64_t group = 0;
  if (!on_gpu(b) || !bind_rms_norm(b, s, &eps, &group)) return nullptr;
  return b.done(std::make_unique<RmsNorm>(s.device, group, eps));
}

// A third output (kt-fuse-calls, param round_act 32 or 256): the norm's rows
// rounded to 8-bit blocks for the products that read them
// (cuda_rounded_rows.h); a third input (kt-fuse-calls): y = a + (b + c). The
// first two of each are the contract cpu.add_rms_norm shares.
std::unique_ptr<Kernel> make_cuda_add_rms_norm(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  float eps = 0;
  if (!on_gpu(b) || !bind_add_rms_norm(b, s, &eps, s.out.size() == 3 ? 1 : 0, s.in.size() == 3 ? 1 : 0))
    return nullptr;
  int act = 0;
  if (s.out.size() == 3) {
    act = int(b.i("round_act"));
    const int64_t n = s.in[0].cols;
    if (b.check(act == 32 || act == 256, "round_act ", act, " is not 32 or 256") &&
        b.check(n % act == 0, "rows of ", n, " values are not whole blocks of ", act)) {
      b.out_type(2, GgmlType::I32);
      b.out_cols(2, cuda::rounded_rows_cols(n, act));
      b.check(s.out[2].max_rows >= s.in[0].max_rows, "output 2 holds ", s.out[2].max_rows, " rows, input 0 ",
              s.in[0].max_rows);
    }
  }
  return b.done(std::make_unique<AddRmsNorm>(s.device, eps, act));
}

std::unique_ptr<Kernel> make_cuda_add(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 2)) b.in_cols(1, s.in[0].cols);
  return b.done(std::make_unique<Elementwise>(s.device, Elementwise::Op::Add));
}

std::unique_ptr<Kernel> make_cuda_silu_mul(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 2)) b.in_cols(1, s.in[0].cols);
  return b.done(std::make_unique<Elementwise>(s.device, Elementwise::Op::SiluMul));
}

std::unique_ptr<Kernel> make_cuda_sigmoid_gate_add(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (same_shapes(b, 3)) {
    b.in_cols(1, s.in[0].cols);
    b.in_cols(2, 1);
  }
  return b.done(std::make_unique<Elementwise>(s.device, Elementwise::Op::SigmoidGateAdd));
}

std::unique_ptr<Kernel> make_cuda_select_rows(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (on_gpu(b) && b.arity(1, 1, 0)) {
    b.out_cols(0, s.in[0].cols);
    b.out_type(0, s.in[0].type);
    b.check(type_traits(s.in[0].type).type_size * size_t(s.in[0].cols) % 4 == 0, "rows of ", s.in[0].cols,
            " values are not whole 4-byte words");
  }
  return b.done(std::make_unique<SelectRows>(s.device));
}

}  // namespace kt::kern
