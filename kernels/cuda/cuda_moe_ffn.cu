// cuda.moe_ffn [x, ids, weights, (x rounded)] -> [routed, shared], weights
// [gate_exps, up_exps, down_exps, gate_shexp, up_shexp, down_shexp]: a MoE
// block's routed experts (cuda.moe_experts) and its shared experts (the
// cuda.matmul_glu and cuda.matmul of the down product), the call kt-fuse-calls
// makes of those three when they read the same rows.
//
// Why: the shared experts do not depend on the routing, yet on one queue their
// four kernels (gate, up with SwiGLU, the rounding of its output, down) wait
// for the routed experts' five or run before them, every layer: ~18 us a
// V2-Lite decode layer in the GPU's chain. At one row (decode) they run on a
// second queue of the GPU (cuda_context.h: side_queue), forked from and joined
// back to the call's queue with events, beside the routed experts: within a
// recorded step the fork and join are part of the graph. They use the side
// queue's workspace, so the two never share scratch. Other steps run
// the shared experts first, then the routed ones, on the call's queue.
//
// The bits are the separate calls': the same MatmulOp paths (run_glu from the
// norm's rounded rows where given, the down product rounding its input), the
// routed experts by cuda.moe_experts' own kernel object.
#include <algorithm>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace {

uint64_t align256(uint64_t v) { return (v + 255) / 256 * 256; }

class CudaMoeFfn final : public Kernel {
 public:
  struct Shared {
    // Any rows, on the call's queue, in its workspace (the routed experts run
    // after them); and one row, beside the routed experts, in the side
    // queue's workspace.
    cuda::MatmulOp gate, up, down, gate1, up1, down1;
    bool glu = false;  // gate.glu_pair(up): one rounding; one row: gate, up and SwiGLU in one launch
    int64_t n_ff = 0;
    int pre_act = 0;  // input 3: x rounded to these blocks (0: none)
    uint64_t act_bytes = 0;  // the serial path's SwiGLU rows (and up's products after them)
  };
  CudaMoeFfn(int device, std::unique_ptr<Kernel> routed, Shared sh, void* side, cudaEvent_t fork, cudaEvent_t join)
      : device_(device), routed_(std::move(routed)), sh_(sh), side_(side), fork_(fork), join_(join) {}
  ~CudaMoeFfn() override {
    if (fork_) cudaEventDestroy(fork_);
    if (join_) cudaEventDestroy(join_);
  }

  bool capturable(const CallArgs& a) const override { return routed_->capturable(routed_args(a)); }
  std::string_view impl() const override { return routed_->impl(); }

  void run(const CallArgs& a) override {
    const Act& x = a.in[0];
    if (x.rows == 0) return;
    cuda::use_device(device_);
    auto s = static_cast<cudaStream_t>(a.queue);
    cuda::RoundedRows pre;
    if (sh_.pre_act) pre = cuda::rounded_rows(a.in[3].data, a.in[3].max_rows, x.cols, sh_.pre_act);
    const cuda::RoundedRows* p = sh_.pre_act ? &pre : nullptr;
    auto* ws = static_cast<uint8_t*>(cuda::workspace(device_));
    float* y = a.out[1].f32();
    if (x.rows == 1 && sh_.glu) {
      auto side = static_cast<cudaStream_t>(side_);
      auto* side_ws = static_cast<uint8_t*>(cuda::workspace(device_, 1));
      auto* act = reinterpret_cast<float*>(side_ws);
      void* scratch = side_ws + align256(uint64_t(sh_.n_ff) * 4);
      cudaEventRecord(fork_, s);
      cudaStreamWaitEvent(side, fork_, 0);
      sh_.gate1.run_glu(sh_.up1, x.f32(), x.cols, 1, act, sh_.n_ff, scratch, side, p);
      sh_.down1.run(act, sh_.n_ff, 1, y, a.out[1].cols, nullptr, scratch, side);
      cudaEventRecord(join_, side);
      routed_->run(routed_args(a));
      cudaStreamWaitEvent(s, join_, 0);
      cuda::check_launch("cuda.moe_ffn (shared experts beside the routed ones)", a.queue);
      return;
    }
    // cuda.matmul_glu's and cuda.matmul's paths, then the routed experts.
    auto* act = reinterpret_cast<float*>(ws);
    void* scratch = ws + 2 * sh_.act_bytes;
    sh_.gate.run_swiglu(sh_.up, x.f32(), x.cols, x.rows, act, reinterpret_cast<float*>(ws + sh_.act_bytes), scratch,
                        a.queue, p);
    sh_.down.run(act, sh_.n_ff, x.rows, y, a.out[1].cols, nullptr, scratch, a.queue);
    routed_->run(routed_args(a));
  }

 private:
  // The routed experts' view of the call: its inputs, the first output and
  // the first three weights.
  static CallArgs routed_args(const CallArgs& a) {
    CallArgs r = a;
    r.out = a.out.subspan(0, 1);
    r.weights = a.weights.subspan(0, 3);
    return r;
  }

  int device_;
  std::unique_ptr<Kernel> routed_;
  Shared sh_;
  void* side_;
  cudaEvent_t fork_, join_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_moe_ffn(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") ||
      !b.arity(s.in.size() == 4 ? 4 : 3, 2, 6))
    return nullptr;
  // The routed experts: cuda.moe_experts' own contract and kernel.
  CallSpec rs = s;
  rs.kernel = "cuda.moe_experts";
  rs.out.resize(1);
  rs.weights.resize(3);
  std::unique_ptr<Kernel> routed = make_cuda_moe_experts(rs, error);
  if (!routed) return nullptr;
  const int64_t n_embd = s.in[0].cols, n_ff = s.weights[3].ne[1];
  b.weight_shape(3, n_embd, n_ff);
  b.weight_shape(4, n_embd, n_ff);
  b.weight_shape(5, n_ff, n_embd);
  b.out_cols(1, n_embd);
  b.out_type(1, GgmlType::F32);
  b.check(s.out[1].max_rows >= s.in[0].max_rows, "output 1 holds ", s.out[1].max_rows, " rows, input 0 ",
          s.in[0].max_rows);
  CudaMoeFfn::Shared sh;
  sh.pre_act = bind_rounded_rows(b, s, 3);
  if (!b.ok()) return nullptr;
  const int64_t rows = s.in[0].max_rows;
  sh.n_ff = n_ff;
  if (!sh.gate.init(s.weights[3], rows, s.rounding, error) || !sh.up.init(s.weights[4], rows, s.rounding, error) ||
      !sh.down.init(s.weights[5], rows, s.rounding, error) ||
      !sh.gate1.init(s.weights[3], 1, s.rounding, error, true) ||
      !sh.up1.init(s.weights[4], 1, s.rounding, error, true) ||
      !sh.down1.init(s.weights[5], 1, s.rounding, error, true))
    return nullptr;
  sh.glu = sh.gate.glu_pair(sh.up);
  // The serial path in the workspace (the routed experts' bytes, used after
  // it); the one-row path in the side queue's.
  sh.act_bytes = align256(uint64_t(rows * n_ff) * 4);
  const uint64_t serial = 2 * sh.act_bytes + std::max({sh.gate.scratch_bytes(), sh.up.scratch_bytes(),
                                                       sh.down.scratch_bytes()});
  const uint64_t beside = align256(uint64_t(n_ff) * 4) + std::max({sh.gate1.scratch_bytes(), sh.up1.scratch_bytes(),
                                                                 sh.down1.scratch_bytes()});
  if (!cuda::reserve_workspace(s.device, serial, error) || !cuda::reserve_workspace(s.device, beside, error, 1))
    return nullptr;
  void* side = cuda::side_queue(s.device, error);
  if (!side) return nullptr;
  cuda::use_device(s.device);
  cudaEvent_t fork = nullptr, join = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    if (fork) cudaEventDestroy(fork);
    cudaGetLastError();
    *error = "cudaEventCreate: " + cuda::error_text(int(e));
    return nullptr;
  }
  return std::make_unique<CudaMoeFfn>(s.device, std::move(routed), sh, side, fork, join);
}

}  // namespace kt::kern
