// cuda.matmul_glu [x] -> [h], weights [gate, up]: h = silu(x gate^T) * (x up^T),
// the call kt-fuse-calls makes of cuda.matmul (gate), cuda.matmul (up) and
// cuda.silu_mul over their outputs (a dense FFN, or shared experts).
//
// Decode (rows up to MatmulOp::kVectorRows, both matrices on the int8 path with
// one rounding of x): x is rounded once; one row takes gate, up and the SwiGLU
// in one launch (a warp a row of both), more rows put the gate products in h
// and the up product's epilogue turns each into swiglu(gate, up) in place
// (MatmulOp::run_glu): two or three launches where the three calls took five. Rows
// where both matrices take the decoded path (MatmulOp::decoded_rows(): one type
// and shape) run gate and up in one GEMM with the SwiGLU in its epilogue.
// Other steps (tile rows, float weights, matrices of different activation
// blocks) run the three calls' kernels one after another, with the up products
// in the workspace. Either way the bits are those of the unfused calls: the products
// are the same kernels' and the SwiGLU is swiglu_value, as cuda.silu_mul's.
// An optional second input holds x's rows already rounded (cuda_rounded_rows.h:
// add_rms_norm's third output), taken at decode in place of the rounding.
#include <algorithm>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_moe_common.cuh"
#include "kernels/kernel_bind.h"

namespace kt::cuda {

void MatmulOp::run_swiglu(const MatmulOp& up, const float* x, int64_t ldx, int64_t rows, float* y, float* u,
                          void* scratch, void* queue, const RoundedRows* pre, Path path) const {
  if (rows <= 0) return;
  // Both products decoded in one GEMM, the SwiGLU in its epilogue: each
  // product's run() sums and the swiglu kernel's value, so the same bits.
  const bool gate_decoded = use_decoded(rows, path), up_decoded = up.use_decoded(rows, path);
  if (gate_decoded && up_decoded && up.type_ == type_ && up.n_in_ == n_in_ && up.n_out_ == n_out_ &&
      up.row_bytes_ == row_bytes_) {
    run_decoded(x, ldx, rows, y, n_out_, nullptr, scratch, queue, &up);
    return;
  }
  if (glu_pair(up) && rows <= kVectorRows && path != Path::Tiles && !gate_decoded && !up_decoded) {
    run_glu(up, x, ldx, rows, y, n_out_, scratch, queue, pre);
    return;
  }
  run(x, ldx, rows, y, n_out_, nullptr, scratch, queue, path);
  up.run(x, ldx, rows, u, n_out_, nullptr, scratch, queue, path);
  const int64_t n = rows * n_out_;
  launch(swiglu_kernel, unsigned(ceil_div(n, 256)), 256, 0, static_cast<cudaStream_t>(queue), y, u, n, y);
  check_launch("cuda swiglu (gate and up unfused)", queue);
}

}  // namespace kt::cuda

namespace kt::kern {

namespace {

class CudaMatmulGlu final : public Kernel {
 public:
  struct Setup {
    cuda::MatmulOp gate, up;
    int device = 0;
    uint64_t up_bytes = 0;  // run_swiglu's up products (unfused path), at the workspace's start
    int pre_act = 0;        // x's rows also come rounded (input 1): their blocks, else 0
  };
  explicit CudaMatmulGlu(Setup s) : s_(s) {}
  bool capturable(const CallArgs&) const override { return true; }
  void run(const CallArgs& a) override {
    cuda::use_device(s_.device);
    const Act &x = a.in[0], &h = a.out[0];
    if (x.rows == 0) return;
    auto* ws = static_cast<uint8_t*>(cuda::workspace(s_.device));
    cuda::RoundedRows pre;
    if (s_.pre_act) pre = cuda::rounded_rows(a.in[1].data, a.in[1].max_rows, x.cols, s_.pre_act);
    s_.gate.run_swiglu(s_.up, x.f32(), x.cols, x.rows, h.f32(), reinterpret_cast<float*>(ws), ws + s_.up_bytes,
                       a.queue, s_.pre_act ? &pre : nullptr);
  }
  std::string_view impl() const override { return s_.gate.impl(1); }

 private:
  Setup s_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_matmul_glu(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(s.in.size() == 2 ? 2 : 1, 1, 2)) return nullptr;
  const int pre_act = bind_rounded_rows(b, s, 1);
  const int64_t n_in = s.in[0].cols, n_ff = s.out[0].cols;
  b.weight_shape(0, n_in, n_ff);
  b.weight_shape(1, n_in, n_ff);
  b.in_type(0, GgmlType::F32);
  b.out_type(0, GgmlType::F32);
  if (!b.ok()) return nullptr;
  CudaMatmulGlu::Setup st;
  st.device = s.device;
  st.pre_act = pre_act;
  const int64_t max_rows = s.in[0].max_rows;
  if (!st.gate.init(s.weights[0], max_rows, s.rounding, error) ||
      !st.up.init(s.weights[1], max_rows, s.rounding, error))
    return nullptr;
  st.up_bytes = (uint64_t(max_rows * n_ff) * 4 + 255) / 256 * 256;
  const uint64_t scratch = std::max(st.gate.scratch_bytes(), st.up.scratch_bytes());
  if (!cuda::reserve_workspace(s.device, st.up_bytes + scratch, error)) return nullptr;
  return std::make_unique<CudaMatmulGlu>(st);
}

}  // namespace kt::kern
