// Routed experts grouped by expert for long steps (prefill): each chosen
// expert's weights are read once for all the tokens that chose it, as GEMMs,
// rather than once per (token, choice) as cuda.moe_experts' vector path reads
// them. Two sources of weights:
//  - streamed (cuda.moe_experts streamed=1): the weights stay in host memory
//    (the CPU's share of a hybrid plan) and each chosen expert's matrices are
//    copied over PCIe for the step;
//  - resident: the weights are on the GPU (all-GPU plans, hot experts);
//    cuda.moe_experts hands its steps of kGroupedMinRows rows and more here.
//
// Streaming:
// A step of n tokens chooses n * n_used (token, expert) pairs; from ~100
// tokens on nearly every expert of a layer is chosen, so the step reads the
// layer's whole expert tensors once, at PCIe speed (~55 GB/s pinned), instead
// of the CPU computing n * n_used expert products (the CPU's matrix throughput
// is the bound there). The compiler emits these calls in the plan's
// prefill.long phase (kt-compile --stream-experts), which the runtime runs for
// steps of at least its min_tokens.
//
// Per step: the router's choices come to the host (the queue is synchronized:
// prefill only), which groups the pairs by expert. The experts then go round
// robin to kLanes streams ("lanes", each with its own buffers), since one
// expert's GEMMs over tens of rows fill only part of the GPU. A lane gathers
// the expert's tokens' rows, runs gate and up by MatmulOp (int8 vector path up
// to 48 rows, fp16 tensor cores above, as cuda.matmul), SwiGLU and down, and
// puts each row at its pair's place; the queue, after every lane, takes the
// weighted sum over each token's choices in choice order, in double, as
// cuda.moe_experts and the reference do. Streamed, a copy stream fills a ring
// of kRing staging slots (one expert's three matrices each) ahead of the
// lanes; events order them: a lane waits for its slot's copy, and a slot's
// next copy waits until the lane that used it is done.
// Measured on the H100 host (PCIe 55.5 GB/s pinned, 55.1 from the page-locked
// mapping, 6.5 pageable): kernels/cuda/README.md.
//
// The host tensors are page-locked at bind (cudaHostRegister, read-only: the
// GGUF mapping), so copies are DMA at full PCIe speed; where that fails the
// copies are pageable (correct, slower) and impl() says so.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_moe_common.cuh"
#include "kernels/cuda/cuda_moe_grouped_gemm.cuh"
#include "kernels/kernel_bind.h"
#include "kernels/moe_contract.h"

namespace kt::cuda {

namespace {

// xe[i] = x[rows[i]] for i < n (cols floats per row).
__global__ void gather_rows(const float* __restrict__ x, int64_t cols, const int32_t* __restrict__ rows, int64_t n,
                            float* __restrict__ xe) {
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  if (r >= n) return;
  const float* src = x + int64_t(rows[r]) * cols;
  float* dst = xe + r * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dst[i] = src[i];
}

// out[pairs[i]] = yd[i] (cols floats per row).
__global__ void scatter_rows(const float* __restrict__ yd, int64_t cols, const int32_t* __restrict__ pairs, int64_t n,
                             float* __restrict__ out) {
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  if (r >= n) return;
  const float* src = yd + r * cols;
  float* dst = out + int64_t(pairs[r]) * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dst[i] = src[i];
}

// Experts computed at once, each on its own stream with its own buffers: one
// expert's GEMMs (tens of rows) fill a fraction of the GPU's SMs.
constexpr int kLanes = 4;
// Staging slots: the lanes' experts plus copies running ahead of them.
constexpr int kRing = 2 * kLanes;

uint64_t align256(uint64_t n) { return (n + 255) / 256 * 256; }

// Page-locks the whole pages inside [p, p + n) (none of a neighbour's: two
// tensors' interiors never overlap, so no range is registered twice).
struct PinnedRange {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  bool pin(const void* p, uint64_t n) {
    const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    const uint64_t a = (reinterpret_cast<uint64_t>(p) + page - 1) / page * page;
    const uint64_t b = (reinterpret_cast<uint64_t>(p) + n) / page * page;
    if (b <= a) return false;
    if (cudaHostRegister(reinterpret_cast<void*>(a), b - a, cudaHostRegisterPortable | cudaHostRegisterReadOnly) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    begin = reinterpret_cast<const uint8_t*>(a);
    end = reinterpret_cast<const uint8_t*>(b);
    return true;
  }
  void unpin() {
    if (begin) cudaHostUnregister(const_cast<uint8_t*>(begin));
    begin = end = nullptr;
  }
  // Host -> device on `s`: the part inside the pinned pages by DMA, the ends
  // (at most a page each, or everything when nothing is pinned) pageable.
  void copy(void* dst, const uint8_t* src, uint64_t n, cudaStream_t s) const {
    const uint8_t* a = std::clamp(begin, src, src + n);
    const uint8_t* b = std::clamp(end, a, src + n);
    auto* d = static_cast<uint8_t*>(dst);
    if (a > src) cudaMemcpyAsync(d, src, uint64_t(a - src), cudaMemcpyHostToDevice, s);
    if (b > a) cudaMemcpyAsync(d + (a - src), a, uint64_t(b - a), cudaMemcpyHostToDevice, s);
    if (src + n > b) cudaMemcpyAsync(d + (b - src), b, uint64_t(src + n - b), cudaMemcpyHostToDevice, s);
  }
};

}  // namespace

}  // namespace kt::cuda

namespace kt::kern {

namespace {

class CudaMoeGrouped final : public Kernel {
 public:
  // The step's routing goes through the host: never recorded (prefill only).
  bool capturable(const CallArgs&) const override { return false; }

  struct Setup {
    int device = 0;
    cuda::MatmulOp gate, up, down;  // shapes and scratch; run on a matrix via at()
    bool streamed = true;
    const uint8_t* host[3] = {};  // streamed: gate, up, down tensors in host memory
    const uint8_t* dev[3] = {};   // resident: the same on the GPU
    uint64_t mat_bytes[3] = {};   // one expert's matrix of each
    uint64_t tensor_bytes[3] = {};
    int64_t n_embd = 0, n_ff = 0, nu = 0, n_held = 0, max_rows = 0;
    std::vector<int32_t> slots;  // router id -> held slice (-1: elsewhere); empty: identity
    // Resident experts of 8-bit-block types under GgmlCpu (unless
    // KT_CUDA_GROUPED_DEVICE=0): the whole step on the GPU
    // (cuda_moe_grouped_gemm.cuh), no routing on the host.
    bool on_device = false;
    cuda::ResidentExperts res;
  };

  explicit CudaMoeGrouped(Setup s) : s_(std::move(s)) {}
  ~CudaMoeGrouped() override {
    cuda::use_device(s_.device);
    for (auto& p : pinned_) p.unpin();
    for (cudaEvent_t e : ready_) cudaEventDestroy(e);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
    if (start_) cudaEventDestroy(start_);
    if (copy_) cudaStreamDestroy(copy_);
    for (cudaStream_t l : lane_)
      if (l) cudaStreamDestroy(l);
    for (cudaEvent_t e : lane_done_)
      if (e) cudaEventDestroy(e);
    if (host_ids_) cudaFreeHost(host_ids_);
    if (d_slots_) cudaFree(d_slots_);
  }

  // Streams, events, pinned host lists, page-locked tensors. False: a CUDA error.
  bool init(std::string* error) {
    cuda::use_device(s_.device);
    cudaError_t e = cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking);
    for (int i = 0; i < cuda::kRing && e == cudaSuccess; ++i) {
      e = cudaEventCreateWithFlags(&ready_[i], cudaEventDisableTiming);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&free_[i], cudaEventDisableTiming);
    }
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&start_, cudaEventDisableTiming);
    for (int i = 0; i < cuda::kLanes && e == cudaSuccess; ++i) {
      e = cudaStreamCreateWithFlags(&lane_[i], cudaStreamNonBlocking);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&lane_done_[i], cudaEventDisableTiming);
    }
    // The ids down, the two pair lists (rows, pair indices) up: 3 lists of
    // max_rows * nu entries (run()'s h_ids, h_rows, h_pair).
    if (e == cudaSuccess) e = cudaMallocHost(&host_ids_, list_bytes() * 3);
    if (e == cudaSuccess && s_.on_device && !s_.slots.empty()) {
      e = cudaMalloc(&d_slots_, s_.slots.size() * 4);
      if (e == cudaSuccess) e = cudaMemcpy(d_slots_, s_.slots.data(), s_.slots.size() * 4, cudaMemcpyHostToDevice);
      s_.res.slots = d_slots_;
      s_.res.n_slots = int64_t(s_.slots.size());
    }
    if (e != cudaSuccess) {
      *error = "streamed experts: " + cuda::error_text(int(e));
      return false;
    }
    all_pinned_ = true;
    if (s_.streamed)
      for (int m = 0; m < 3; ++m) all_pinned_ &= pinned_[m].pin(s_.host[m], s_.tensor_bytes[m]);
    return true;
  }

  // Workspace: the ring, the pairs' outputs, the device pair lists, then per
  // lane x rows gathered, gate/up/down outputs and MatmulOp's scratch.
  static uint64_t slot_bytes(const Setup& s) {
    return cuda::align256(s.mat_bytes[0]) + cuda::align256(s.mat_bytes[1]) + cuda::align256(s.mat_bytes[2]);
  }
  static uint64_t lane_bytes(const Setup& s) {
    const uint64_t r = uint64_t(s.max_rows);
    return cuda::align256(r * s.n_embd * 4) * 2 + cuda::align256(r * s.n_ff * 4) * 2 +
           cuda::align256(std::max({s.gate.scratch_bytes(), s.up.scratch_bytes(), s.down.scratch_bytes()}));
  }
  static uint64_t shared_bytes(const Setup& s) {
    const uint64_t pairs = uint64_t(s.max_rows) * uint64_t(s.nu);
    return (s.streamed ? cuda::kRing * slot_bytes(s) : 0) + cuda::align256(pairs * s.n_embd * 4) +
           2 * cuda::align256(pairs * 4);
  }
  static uint64_t workspace_bytes(const Setup& s) {
    const uint64_t lanes = cuda::kLanes * lane_bytes(s);
    return shared_bytes(s) + (s.on_device ? std::max(lanes, cuda::resident_experts_workspace(s.res, s.max_rows)) : lanes);
  }

  void run(const CallArgs& a) override {
    cuda::use_device(s_.device);
    const Act &x = a.in[0], &ids = a.in[1], &wts = a.in[2], &y = a.out[0];
    const int64_t n = x.rows, nu = s_.nu, np = n * nu;
    if (n == 0) return;
    auto q = static_cast<cudaStream_t>(a.queue);
    if (s_.on_device && np <= 65535) return run_on_device(a);

    // The choices, to the host.
    int32_t* h_ids = host_ids_;
    int32_t* h_rows = h_ids + list_entries();   // per pair, grouped by expert: the token's row
    int32_t* h_pair = h_rows + list_entries();  // ... and the pair's index t * nu + k
    cudaMemcpyAsync(h_ids, ids.i32(), uint64_t(np) * 4, cudaMemcpyDeviceToHost, q);
    cudaStreamSynchronize(q);

    // Pairs grouped by held slice (a counting sort, tokens in order within one).
    counts_.assign(size_t(s_.n_held) + 1, 0);
    auto slice = [&](int32_t e) -> int64_t {
      if (e < 0) return -1;
      if (s_.slots.empty()) return e < s_.n_held ? e : -1;
      return size_t(e) < s_.slots.size() ? s_.slots[size_t(e)] : -1;
    };
    for (int64_t p = 0; p < np; ++p)
      if (int64_t j = slice(h_ids[p]); j >= 0) ++counts_[size_t(j) + 1];
    for (int64_t j = 0; j < s_.n_held; ++j) counts_[size_t(j) + 1] += counts_[size_t(j)];
    fill_ = counts_;
    for (int64_t p = 0; p < np; ++p)
      if (int64_t j = slice(h_ids[p]); j >= 0) {
        const int64_t at = fill_[size_t(j)]++;
        h_rows[at] = int32_t(p / nu);
        h_pair[at] = int32_t(p);
      }
    const int64_t n_pairs = counts_[size_t(s_.n_held)];

    // Workspace layout (workspace_bytes).
    auto* ws = static_cast<uint8_t*>(cuda::workspace(s_.device));
    uint8_t* ring = ws;
    const uint64_t slot = slot_bytes(s_), pairs_max = uint64_t(s_.max_rows * nu);
    auto* ypairs = reinterpret_cast<float*>(ring + (s_.streamed ? cuda::kRing * slot : 0));
    auto* d_rows =
        reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(ypairs) + cuda::align256(pairs_max * s_.n_embd * 4));
    int32_t* d_pair = d_rows + cuda::align256(pairs_max * 4) / 4;
    struct Lane {
      float *xe, *yg, *yu, *yd;
      void* scratch;
    } lanes[cuda::kLanes];
    for (int l = 0; l < cuda::kLanes; ++l) {
      uint8_t* b = ws + shared_bytes(s_) + uint64_t(l) * lane_bytes(s_);
      const uint64_t xb = cuda::align256(s_.max_rows * s_.n_embd * 4), hb = cuda::align256(s_.max_rows * s_.n_ff * 4);
      lanes[l] = {reinterpret_cast<float*>(b), reinterpret_cast<float*>(b + xb), reinterpret_cast<float*>(b + xb + hb),
                  reinterpret_cast<float*>(b + xb + 2 * hb), b + 2 * xb + 2 * hb};
    }

    // Pairs whose expert lives elsewhere (hot experts on the GPU) add nothing.
    cudaMemsetAsync(ypairs, 0, uint64_t(np) * s_.n_embd * 4, q);
    if (n_pairs > 0) {
      cudaMemcpyAsync(d_rows, h_rows, uint64_t(n_pairs) * 4, cudaMemcpyHostToDevice, q);
      cudaMemcpyAsync(d_pair, h_pair, uint64_t(n_pairs) * 4, cudaMemcpyHostToDevice, q);
    }
    // Copies and lanes start after the queue's work so far: the lists above,
    // and earlier kernels that may still read the workspace they overwrite.
    cudaEventRecord(start_, q);
    if (s_.streamed) cudaStreamWaitEvent(copy_, start_, 0);
    for (int l = 0; l < cuda::kLanes; ++l) cudaStreamWaitEvent(lane_[l], start_, 0);

    int64_t k = 0;  // experts issued this step
    for (int64_t j = 0; j < s_.n_held; ++j) {
      const int64_t c = counts_[size_t(j) + 1] - counts_[size_t(j)];
      if (c == 0) continue;
      const int r = int(k % cuda::kRing);
      const Lane& L = lanes[k % cuda::kLanes];
      cudaStream_t ls = lane_[k % cuda::kLanes];
      const uint8_t* mats[3];
      if (s_.streamed) {
        uint8_t* dst = ring + uint64_t(r) * slot;
        uint8_t* to[3] = {dst, dst + cuda::align256(s_.mat_bytes[0]),
                          dst + cuda::align256(s_.mat_bytes[0]) + cuda::align256(s_.mat_bytes[1])};
        // The slot's previous expert (k - kRing) was issued before: wait for it.
        if (k >= cuda::kRing) cudaStreamWaitEvent(copy_, free_[r], 0);
        for (int m = 0; m < 3; ++m) {
          pinned_[m].copy(to[m], s_.host[m] + uint64_t(j) * s_.mat_bytes[m], s_.mat_bytes[m], copy_);
          mats[m] = to[m];
        }
        cudaEventRecord(ready_[r], copy_);
        cudaStreamWaitEvent(ls, ready_[r], 0);
      } else {
        for (int m = 0; m < 3; ++m) mats[m] = s_.dev[m] + uint64_t(j) * s_.mat_bytes[m];
      }
      const int64_t o = counts_[size_t(j)];
      cuda::launch(cuda::gather_rows, unsigned(c), 256, 0, ls, x.f32(), x.cols, d_rows + o, c, L.xe);
      s_.gate.at(mats[0]).run(L.xe, s_.n_embd, c, L.yg, s_.n_ff, nullptr, L.scratch, ls);
      s_.up.at(mats[1]).run(L.xe, s_.n_embd, c, L.yu, s_.n_ff, nullptr, L.scratch, ls);
      const int64_t nh = c * s_.n_ff;
      cuda::launch(cuda::swiglu_kernel, unsigned(cuda::ceil_div(nh, 256)), 256, 0, ls, L.yg, L.yu, nh, L.yg);
      s_.down.at(mats[2]).run(L.yg, s_.n_ff, c, L.yd, s_.n_embd, nullptr, L.scratch, ls);
      // Each pair's row is written by its expert's lane only.
      cuda::launch(cuda::scatter_rows, unsigned(c), 256, 0, ls, L.yd, s_.n_embd, d_pair + o, c, ypairs);
      if (s_.streamed) cudaEventRecord(free_[r], ls);
      ++k;
    }
    // The weighted sum waits for every lane.
    for (int l = 0; l < cuda::kLanes; ++l) {
      cudaEventRecord(lane_done_[l], lane_[l]);
      cudaStreamWaitEvent(q, lane_done_[l], 0);
    }
    cuda::launch(cuda::combine_experts, cuda::combine_grid(s_.n_embd, n), 256, 0, q, ypairs, wts.f32(), int(nu),
                 s_.n_embd, y.f32());
    cuda::check_launch("cuda.moe_experts (grouped)", a.queue);
  }

  std::string_view impl() const override {
    if (!s_.streamed) return s_.on_device ? "grouped on the GPU" : "grouped";
    return all_pinned_ ? "streamed-pinned" : "streamed-pageable";
  }

 private:
  // The step without the host: pairs sorted and every expert's products on
  // the GPU (cuda_moe_grouped_gemm.cu), then the weighted sum.
  void run_on_device(const CallArgs& a) {
    const Act &x = a.in[0], &ids = a.in[1], &wts = a.in[2], &y = a.out[0];
    const int64_t n = x.rows, np = n * s_.nu;
    auto q = static_cast<cudaStream_t>(a.queue);
    auto* ws = static_cast<uint8_t*>(cuda::workspace(s_.device));
    auto* ypairs = reinterpret_cast<float*>(ws);  // streamed only has a ring before it
    // Pairs whose expert lives elsewhere (hot experts on the GPU) add nothing.
    cudaMemsetAsync(ypairs, 0, uint64_t(np) * s_.n_embd * 4, q);
    cuda::run_resident_experts(s_.res, x.f32(), n, ids.i32(), ypairs, ws + shared_bytes(s_), q);
    cuda::launch(cuda::combine_experts, cuda::combine_grid(s_.n_embd, n), 256, 0, q, ypairs, wts.f32(), int(s_.nu),
                 s_.n_embd, y.f32());
    cuda::check_launch("cuda.moe_experts (grouped on the GPU)", a.queue);
  }

  int64_t list_entries() const { return s_.max_rows * s_.nu; }
  uint64_t list_bytes() const { return uint64_t(list_entries()) * 4; }

  Setup s_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ready_[cuda::kRing] = {}, free_[cuda::kRing] = {}, start_ = nullptr;
  cudaStream_t lane_[cuda::kLanes] = {};
  cudaEvent_t lane_done_[cuda::kLanes] = {};
  int32_t* host_ids_ = nullptr;
  int32_t* d_slots_ = nullptr;
  cuda::PinnedRange pinned_[3];
  bool all_pinned_ = false;
  std::vector<int64_t> counts_, fill_;
};

// Both factories: the contract cuda.moe_experts checks, then the setup.
std::unique_ptr<Kernel> make_grouped(const CallSpec& s, bool streamed, int64_t max_rows, std::string* error) {
  Binder b(s, error);
  MoeExpertsShape shape;
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") ||
      !bind_moe_experts(b, s, &shape, s.in.size() > 3 ? 1 : 0))
    return nullptr;
  b.check(b.ints("choices").empty(), "choices (expert deferral) is a CPU experts' param");
  if (streamed)
    for (size_t m = 0; m < 3; ++m)
      b.check(s.weights[m].host != nullptr && s.weights[m].host == s.weights[m].data,
              "streamed experts read their weights from host memory: weight '", std::string(s.weights[m].name),
              "' must be the CPU's");
  if (!b.ok()) return nullptr;
  const int64_t ne = shape.n_held;
  CudaMoeGrouped::Setup st;
  st.device = s.device;
  st.streamed = streamed;
  st.n_embd = shape.n_embd;
  st.n_ff = shape.n_ff;
  st.nu = shape.n_used;
  st.n_held = ne;
  st.max_rows = std::max<int64_t>(1, max_rows);
  st.slots.assign(shape.slots.begin(), shape.slots.end());
  // One expert's matrix as MatmulOp sees it; at() points it at the expert's.
  for (size_t m = 0; m < 3; ++m) {
    WeightView one = s.weights[m];
    one.ne[2] = 1;
    one.nb[3] = one.nb[2];
    cuda::MatmulOp& op = m == 0 ? st.gate : m == 1 ? st.up : st.down;
    if (!op.init(one, st.max_rows, s.rounding, error)) return nullptr;
    st.host[m] = static_cast<const uint8_t*>(s.weights[m].host);
    st.dev[m] = static_cast<const uint8_t*>(s.weights[m].data);
    st.mat_bytes[m] = s.weights[m].nb[2];
    st.tensor_bytes[m] = s.weights[m].nb[2] * uint64_t(ne);
    st.res.w[m] = st.dev[m];
    st.res.type[m] = s.weights[m].type;
    st.res.row_bytes[m] = s.weights[m].nb[1];
    st.res.mat_bytes[m] = s.weights[m].nb[2];
  }
  st.res.n_embd = st.n_embd;
  st.res.n_ff = st.n_ff;
  st.res.nu = st.nu;
  st.res.n_held = ne;
  // The default where it applies (KT_CUDA_GROUPED_DEVICE=0: the host's
  // grouping). With every expert busy, as a trained model's prompt keeps them,
  // it is 1.06-2.6x the host's grouping, which launches ~15 kernels per chosen
  // expert, and it wins under random weights' own routing (a few experts take
  // most rows) too, but for V3-5L's 2048-token steps (-2.5%). It takes f16
  // tiles where the host's path takes int8 vector products (48 rows an expert
  // and fewer): kernels/cuda/README.md.
  const char* on = std::getenv("KT_CUDA_GROUPED_DEVICE");
  st.on_device = !streamed && s.rounding == Rounding::GgmlCpu && cuda::resident_experts_apply(st.res) &&
                 !(on && std::string(on) == "0");
  if (!cuda::reserve_workspace(s.device, CudaMoeGrouped::workspace_bytes(st), error)) return nullptr;
  auto k = std::make_unique<CudaMoeGrouped>(std::move(st));
  if (!k->init(error)) return nullptr;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_cuda_moe_experts_streamed(const CallSpec& s, std::string* error) {
  return make_grouped(s, true, s.in.empty() ? 1 : s.in[0].max_rows, error);
}

std::unique_ptr<Kernel> make_cuda_moe_experts_grouped(const CallSpec& s, std::string* error) {
  return make_grouped(s, false, s.in.empty() ? 1 : s.in[0].max_rows, error);
}

}  // namespace kt::kern
