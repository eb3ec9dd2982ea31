// cuda.matmul_multi [x (, x rounded)] -> [y0, .., yn-1], weights [w0, .., wn-1
// (, b0, .., bn-1)]: yi = x wi^T (+ bi), the call kt-fuse-calls makes of
// adjacent cuda.matmul calls of one input over matrices of one type and width
// (an MLA layer's q and kv_a products, a GQA layer's q, k and v).
//
// Why: at decode each product is a launch of a few microseconds, most of it the
// latency of its first loads, and the small ones (kv_a's 576 rows, k's and v's)
// leave most of the GPU idle. One launch (MatmulOp::run_products) puts every
// matrix's rows in flight at once, from one rounding of x. Steps of more rows
// than the vector path takes run the products one after another. Either way
// each output holds cuda.matmul's bits.
#include <array>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace {

constexpr int kMax = cuda::MatmulOp::kMaxProducts;

class CudaMatmulMulti final : public Kernel {
 public:
  struct Setup {
    std::array<cuda::MatmulOp, kMax> ops;
    int n = 0;
    bool bias = false;
    int device = 0;
    int pre_act = 0;  // x's rows also come rounded (input 1): their blocks, else 0
  };
  explicit CudaMatmulMulti(Setup s) : s_(s) {}
  bool capturable(const CallArgs&) const override { return true; }
  void run(const CallArgs& a) override {
    cuda::use_device(s_.device);
    const Act& x = a.in[0];
    if (x.rows == 0) return;
    std::array<float*, kMax> y{};
    std::array<int64_t, kMax> ldy{};
    std::array<const float*, kMax> bias{};
    for (int i = 0; i < s_.n; ++i) {
      y[size_t(i)] = a.out[size_t(i)].f32();
      ldy[size_t(i)] = a.out[size_t(i)].cols;
      bias[size_t(i)] = s_.bias ? a.weights[size_t(s_.n + i)].f32() : nullptr;
    }
    cuda::RoundedRows pre;
    if (s_.pre_act) pre = cuda::rounded_rows(a.in[1].data, a.in[1].max_rows, x.cols, s_.pre_act);
    cuda::MatmulOp::run_products(s_.ops.data(), s_.n, x.f32(), x.cols, x.rows, y.data(), ldy.data(), bias.data(),
                                 cuda::workspace(s_.device), a.queue, s_.pre_act ? &pre : nullptr);
  }
  std::string_view impl() const override { return s_.ops[0].impl(1); }

 private:
  Setup s_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_matmul_multi(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  const size_t n = s.out.size();
  if (!b.check(n >= 2 && size_t(kMax) >= n, "cuda.matmul_multi takes 2 to ", kMax, " products, not ", n) ||
      !b.check(s.weights.size() == n || s.weights.size() == 2 * n, "cuda.matmul_multi of ", n,
               " products takes ", n, " weights, or ", 2 * n, " with biases; got ", s.weights.size()) ||
      !b.arity(s.in.size() == 2 ? 2 : 1, n, n, 2 * n))
    return nullptr;
  const int pre_act = bind_rounded_rows(b, s, 1);
  b.in_type(0, GgmlType::F32);
  CudaMatmulMulti::Setup st;
  st.n = int(n);
  st.bias = s.weights.size() == 2 * n;
  st.device = s.device;
  st.pre_act = pre_act;
  uint64_t scratch = 0;
  for (size_t i = 0; i < n; ++i) {
    b.weight_shape(i, s.in[0].cols, s.out[i].cols);
    b.out_type(i, GgmlType::F32);
    if (st.bias) {
      b.check(s.weights[n + i].type == GgmlType::F32, "bias '", std::string(s.weights[n + i].name), "' must be F32");
      b.weight_shape(n + i, s.out[i].cols);
    }
    if (!b.ok()) return nullptr;
    if (!st.ops[i].init(s.weights[i], s.in[0].max_rows, s.rounding, error)) return nullptr;
    scratch = std::max(scratch, st.ops[i].scratch_bytes());
  }
  if (!cuda::reserve_workspace(s.device, scratch, error)) return nullptr;
  return std::make_unique<CudaMatmulMulti>(st);
}

}  // namespace kt::kern
