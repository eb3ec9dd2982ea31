// cuda.matmuls [x] -> [y0, .., yn-1], weights [w0, .., wn-1]: several products
// of one input, the call kt-fuse-calls makes of plain cuda.matmul calls that
// read the same rows with weights of one type (V2's q and kv_a, V3's q_a and
// kv_a, a GQA layer's q, k and v). At decode the products are one launch from
// one rounding of x (MatmulOp::run_siblings): a link less in the GPU's chain
// per product joined, and the small kv_a's blocks fill the SMs beside q's.
// Other steps run each product's kernels in turn. Either way the bits are those
// of the separate calls. An optional second input holds x's rows already
// rounded (add_rms_norm's third output, cuda_rounded_rows.h).
#include <algorithm>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace {

class CudaMatmuls final : public Kernel {
 public:
  CudaMatmuls(std::vector<cuda::MatmulOp> ops, int device, int pre_act)
      : ops_(std::move(ops)), device_(device), pre_act_(pre_act) {}
  bool capturable(const CallArgs&) const override { return true; }
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act& x = a.in[0];
    float* y[cuda::kMaxSiblings];
    for (size_t k = 0; k < ops_.size(); ++k) y[k] = a.out[k].f32();
    cuda::RoundedRows pre;
    if (pre_act_) pre = cuda::rounded_rows(a.in[1].data, a.in[1].max_rows, x.cols, pre_act_);
    cuda::MatmulOp::run_siblings(ops_.data(), int(ops_.size()), x.f32(), x.cols, x.rows, y, cuda::workspace(device_),
                                 a.queue, pre_act_ ? &pre : nullptr);
  }
  std::string_view impl() const override { return ops_[0].impl(1); }

 private:
  std::vector<cuda::MatmulOp> ops_;
  int device_;
  int pre_act_;  // x's rows also come rounded (input 1): their blocks, else 0
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_matmuls(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  const size_t n = s.weights.size();
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") ||
      !b.check(n >= 2 && n <= size_t(cuda::kMaxSiblings), "cuda.matmuls takes 2 to ", cuda::kMaxSiblings,
               " weights, not ", n) ||
      !b.arity(s.in.size() == 2 ? 2 : 1, n, n))
    return nullptr;
  const int pre_act = bind_rounded_rows(b, s, 1);
  b.in_type(0, GgmlType::F32);
  for (size_t k = 0; k < n; ++k) {
    b.weight_shape(k, s.in[0].cols, s.out[k].cols);
    b.out_type(k, GgmlType::F32);
    b.check(s.out[k].max_rows >= s.in[0].max_rows, "output ", k, " holds ", s.out[k].max_rows, " rows, input 0 ",
            s.in[0].max_rows);
  }
  if (!b.ok()) return nullptr;
  std::vector<cuda::MatmulOp> ops(n);
  uint64_t scratch = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!ops[k].init(s.weights[k], s.in[0].max_rows, s.rounding, error)) return nullptr;
    scratch = std::max(scratch, ops[k].scratch_bytes());
  }
  if (!cuda::reserve_workspace(s.device, scratch, error)) return nullptr;
  return std::make_unique<CudaMatmuls>(std::move(ops), s.device, pre_act);
}

}  // namespace kt::kern
