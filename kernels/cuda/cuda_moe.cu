// Mixture of experts on the GPU: cuda.moe_gate (the router) and
// cuda.moe_experts (routed experts, for plans that put them on the GPU).
//
// moe_gate: the router's logits by MatmulOp, then one warp per token runs
// ops_ref_moe.cpp's moe_route: softmax or sigmoid in double as the reference
// takes them, the selection bias, DeepSeek-V3's grouped top-k (groups scored by
// the sum of their two best), the n_used best experts with the reference's tie
// order (larger first, then lower index), weights normalized in double and
// scaled. With a RoutingHook (profiles, tests, forced routing) the logits go to
// the host and the reference routes there, so the hook sees margins and may
// take runner-ups exactly as on the CPU; that path synchronizes the queue.
//
// moe_experts: for each (token, choice) pair, gate and up by the int8 (or
// float) matrix-vector kernel reading the chosen expert's matrices, SwiGLU,
// down, then the weighted sum in double. Weights of an expert chosen by several
// tokens of a step are read once per pair: fine for decode; prefill of experts
// on the GPU would want a grouped GEMM (not done).
#include <algorithm>
#include <vector>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_moe_common.cuh"
#include "kernels/kernel_bind.h"
#include "kernels/moe_contract.h"

namespace kt::cuda {

namespace {

constexpr int kMaxExpertsPerLane = 16;  // up to 512 experts

struct RouteArgs {
  int n_expert, n_used, gating, n_group, topk_group;
  bool norm;
  float scale;
  // Nonzero: the ids are drawn uniformly at random instead (n_used distinct
  // experts a token, the routing's weights kept: RoutingHook::
  // device_uniform_seed), keyed by this, the layer and the token's slot and
  // position.
  uint64_t forced_seed = 0;
  int layer = 0;
};

__device__ __forceinline__ uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// (value, index): larger value first, then lower index (a stable descending sort).
__device__ __forceinline__ bool better(float v, int i, float v2, int i2) { return v > v2 || (v == v2 && i < i2); }

__device__ __forceinline__ void warp_argmax(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(v2, i2, v, i)) v = v2, i = i2;
  }
}

// One warp per token; lane l holds experts l, l + 32, ... (EPL of them: the
// expert count over 32, rounded up to a power of two, so a 64-expert router
// unrolls two per lane rather than kMaxExpertsPerLane). Choice u ends on lane u,
// in registers, and lanes write their own choice (V2-Lite, ncu on an H200:
// 11.5 -> 3.6 us; the choices were a stack array).
template <int EPL>
__global__ void __launch_bounds__(128) route_kernel(const float* __restrict__ logits, int64_t n_tok, RouteArgs r,
                                                    const float* __restrict__ bias, int32_t* __restrict__ ids,
                                                    float* __restrict__ weights, const int32_t* __restrict__ pos,
                                                    const int32_t* __restrict__ slot) {
  wait_for_inputs();
  __shared__ float sel_s[4][EPL * 32];
  __shared__ int perm_s[4][EPL * 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int64_t t = int64_t(blockIdx.x) * 4 + w;
  if (t >= n_tok) return;
  const float* lg = logits + t * r.n_expert;
  float prob[EPL], sel[EPL];
  if (r.gating == 1) {
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      if (e < r.n_expert) mx = fmaxf(mx, lg[e]);
    }
    mx = warp_max(mx);
    double e_k[EPL], sum = 0.0;
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      e_k[k] = e < r.n_expert ? exp(double(lg[e]) - double(mx)) : 0.0;
      sum += e_k[k];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int k = 0; k < EPL; ++k) prob[k] = float(e_k[k] / sum);
  } else {
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      prob[k] = e < r.n_expert ? float(1.0 / (1.0 + exp(-double(lg[e])))) : 0.0f;
    }
  }
#pragma unroll
  for (int k = 0; k < EPL; ++k) {
    const int e = lane + 32 * k;
    sel[k] = e < r.n_expert ? (bias ? __fadd_rn(prob[k], bias[e]) : prob[k]) : -INFINITY;
  }

  if (r.n_group > 1) {
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      if (e < r.n_expert) sel_s[w][e] = sel[k];
    }
    __syncwarp();
    const int per_group = r.n_expert / r.n_group;
    // Group g's score: the sum of its two best selection values.
    float score = -INFINITY;
    if (lane < r.n_group) {
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int i = 0; i < per_group; ++i) {
        const float v = sel_s[w][lane * per_group + i];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      score = per_group >= 2 ? float(double(b1) + double(b2)) : b1;
    }
    // Keep the topk_group best groups.
    bool keep = false;
    float gv = lane < r.n_group ? score : -INFINITY;
    for (int k = 0; k < r.topk_group; ++k) {
      float v = lane < r.n_group && !keep ? gv : -INFINITY;
      int i = lane < r.n_group && !keep ? lane : 1 << 30;
      warp_argmax(v, i);
      if (lane == i) keep = true;
    }
    const unsigned kept = __ballot_sync(0xffffffffu, keep);
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      if (e < r.n_expert && !((kept >> (e / per_group)) & 1u)) sel[k] = -INFINITY;
    }
  }

  // The n_used best eligible experts, best first.
  unsigned chosen = 0;  // bit k: expert lane + 32 k taken
  double sum = 0.0;
  float my_w = 0.0f;  // choice `lane`
  int my_i = 0;
  for (int u = 0; u < r.n_used; ++u) {
    float v = -INFINITY;
    int i = 1 << 30;
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      const int e = lane + 32 * k;
      if (e < r.n_expert && !((chosen >> k) & 1u) && better(sel[k], e, v, i)) v = sel[k], i = e;
    }
    warp_argmax(v, i);
    if (i < r.n_expert && (i & 31) == lane) chosen |= 1u << (i >> 5);
    // The chosen expert's prob, from its lane.
    float p = 0.0f;
#pragma unroll
    for (int k = 0; k < EPL; ++k)
      if (lane + 32 * k == i) p = prob[k];
    p = __shfl_sync(0xffffffffu, p, i < r.n_expert ? (i & 31) : 0);
    if (lane == u) my_w = p, my_i = i;
    sum += double(p);
  }
  if (r.forced_seed) {
    // Forced: the first n_used of a random permutation (lane 0 draws, a
    // partial Fisher-Yates shuffle), each in the place of a routed choice.
    int* perm = perm_s[w];
    for (int e = lane; e < r.n_expert; e += 32) perm[e] = e;
    __syncwarp();
    if (lane == 0) {
      uint64_t s = r.forced_seed ^ (uint64_t(uint32_t(r.layer)) << 48) ^ (uint64_t(uint32_t(slot[t])) << 32) ^
                   uint64_t(uint32_t(pos[t]));
      for (int u = 0; u < r.n_used; ++u) {
        const int j = u + int((splitmix64(s) >> 32) % uint64_t(r.n_expert - u));
        const int v = perm[u];
        perm[u] = perm[j];
        perm[j] = v;
      }
    }
    __syncwarp();
    if (lane < r.n_used) my_i = perm[lane];
  }
  if (lane >= r.n_used) return;
  if (r.norm) sum = fmax(sum, 6.103515625e-5);
  float v = my_w;
  if (r.norm) v = float(double(v) / sum);
  if (r.scale != 0.0f && r.scale != 1.0f) v = __fmul_rn(v, r.scale);
  ids[t * r.n_used + lane] = my_i;
  weights[t * r.n_used + lane] = v;
}

// Expert ids to the slices this device holds (-1: held elsewhere, or an id
// the table does not cover).
__global__ void map_expert_slots(const int32_t* __restrict__ ids, int64_t n, const int32_t* __restrict__ slots,
                                 int n_slots, int32_t* __restrict__ out) {
  wait_for_inputs();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t e = ids[i];
  out[i] = e >= 0 && e < n_slots ? slots[e] : -1;
}

}  // namespace

}  // namespace kt::cuda

namespace kt::kern {

namespace {

namespace ref = cpu::ref;

class CudaMoeGate final : public Kernel {
 public:
  // A routing hook routes on the host, waiting for the logits: not recorded;
  // unless the GPU draws for it (forced uniform routing), keyed by its seed.
  bool capturable(const CallArgs& a) const override { return !host_routes(a); }
  uint64_t graph_key(const CallArgs& a) const override { return a.routing ? a.routing->device_uniform_seed() : 0; }
  CudaMoeGate(int device, cuda::MatmulOp op, cuda::RouteArgs r, ref::MoeRouting host_r, bool bias)
      : device_(device), op_(op), r_(r), host_r_(host_r), bias_(bias) {}

  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &x = a.in[0], &ids = a.out[0], &w = a.out[1];
    const int64_t n = x.rows, ne = r_.n_expert, nu = r_.n_used;
    if (n == 0) return;
    auto s = static_cast<cudaStream_t>(a.queue);
    auto* logits = static_cast<float*>(cuda::workspace(device_));
    void* scratch = logits + (n_logit_floats() + 63) / 64 * 64;
    op_.run(x.f32(), x.cols, n, logits, ne, nullptr, scratch, a.queue);
    const float* bias = bias_ ? a.weights[1].f32() : nullptr;
    if (!host_routes(a)) {
      cuda::RouteArgs r = r_;
      cuda::DeviceStep st;
      if (a.routing) {
        r.forced_seed = a.routing->device_uniform_seed();
        r.layer = a.layer;
        st = cuda::upload_step(*a.step, a.queue);
      }
      const unsigned blocks = unsigned(cuda::ceil_div(n, 4));
      const int epl = int(cuda::ceil_div(ne, 32));
      int32_t* id = ids.i32();
      float* wt = w.f32();
      if (epl <= 2)
        cuda::launch(cuda::route_kernel<2>, blocks, 128, 0, s, logits, n, r, bias, id, wt, st.pos, st.slot);
      else if (epl <= 4)
        cuda::launch(cuda::route_kernel<4>, blocks, 128, 0, s, logits, n, r, bias, id, wt, st.pos, st.slot);
      else if (epl <= 8)
        cuda::launch(cuda::route_kernel<8>, blocks, 128, 0, s, logits, n, r, bias, id, wt, st.pos, st.slot);
      else
        cuda::launch(cuda::route_kernel<cuda::kMaxExpertsPerLane>, blocks, 128, 0, s, logits, n, r, bias, id, wt,
                     st.pos, st.slot);
      cuda::check_launch("cuda.moe_gate", a.queue);
      return;
    }
    // The hook's path: route on the host with the reference (margins, runner-ups).
    std::vector<float> lg(static_cast<size_t>(n * ne)), margins(static_cast<size_t>(n)), wt(static_cast<size_t>(n * nu)), bias_h;
    std::vector<int32_t> id(size_t(n * nu));
    cudaMemcpyAsync(lg.data(), logits, lg.size() * 4, cudaMemcpyDeviceToHost, s);
    if (bias) {
      bias_h.resize(size_t(ne));
      cudaMemcpyAsync(bias_h.data(), bias, bias_h.size() * 4, cudaMemcpyDeviceToHost, s);
    }
    cudaStreamSynchronize(s);
    ref::MoeRouting r = host_r_;
    r.selection_bias = bias ? bias_h.data() : nullptr;
    ref::moe_route(lg.data(), n, r, id.data(), wt.data(), margins.data());
    RouteEvent ev;
    ev.layer = a.layer;
    ev.step = a.step;
    ev.n_expert = ne;
    ev.n_used = nu;
    ev.logits = lg.data();
    ev.margins = margins.data();
    ev.ids = id.data();
    ev.weights = wt.data();
    ev.take_runner_up = [&](int64_t t, int k) {
      const uint8_t swap = uint8_t(k);
      ref::moe_route(&lg[size_t(t * ne)], 1, r, id.data() + t * nu, wt.data() + t * nu, nullptr, &swap);
    };
    a.routing->on_route(ev);
    cudaMemcpyAsync(ids.data, id.data(), id.size() * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(w.data, wt.data(), wt.size() * 4, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);  // the host vectors go away
    cuda::check_launch("cuda.moe_gate (routing hook)", a.queue);
  }
  std::string_view impl() const override { return op_.impl(1); }

  int64_t max_rows = 0;
  int64_t n_logit_floats() const { return max_rows * r_.n_expert; }

 private:
  static bool host_routes(const CallArgs& a) { return a.routing && !a.routing->device_uniform_seed(); }

  int device_;
  cuda::MatmulOp op_;
  cuda::RouteArgs r_;
  ref::MoeRouting host_r_;
  bool bias_;
};

class CudaMoeExperts final : public Kernel {
 public:
  // Steps of at least this many rows go to the grouped path
  // (cuda_moe_grouped.cu: each chosen expert's weights read once for all its
  // tokens, at the price of one host synchronization per call); below, the
  // vector path reads an expert once per (token, choice), which at 64 rows
  // and V2-Lite's 6 of 64 experts is already ~6 reads per expert.
  static constexpr int64_t kGroupedMinRows = 64;
  bool capturable(const CallArgs& a) const override { return !grouped(a); }
  struct Setup {
    int device;
    cuda::MatmulOp gate, up, down;
    // gate and up from one rounding of x, and the SwiGLU, in one launch
    // (MatmulOp::run_experts_glu).
    bool glu = false;
    int64_t n_embd, n_ff, nu, chunk;
    int32_t* slots = nullptr;  // device copy of expert_slots; null: every id is its slice
    int n_slots = 0;
    int pre_act = 0;  // x's rows also come rounded (input 3, kt-fuse-calls): their blocks, else 0
  };
  explicit CudaMoeExperts(Setup s) : s_(s) {}
  ~CudaMoeExperts() override {
    if (s_.slots) cudaFree(s_.slots);
  }

  static uint64_t scratch_bytes(const Setup& s) {
    const uint64_t pairs = uint64_t(s.chunk * s.nu);
    return (2 * pairs * s.n_ff + pairs * s.n_embd) * 4 + pairs * 4 + 1280 +
           std::max({s.gate.scratch_bytes(), s.up.scratch_bytes(), s.down.scratch_bytes()});
  }

  void run(const CallArgs& a) override {
    if (grouped(a)) return grouped_->run(a);
    cuda::use_device(s_.device);
    const Act &x = a.in[0], &ids = a.in[1], &wts = a.in[2], &y = a.out[0];
    if (x.rows == 0) return;
    auto s = static_cast<cudaStream_t>(a.queue);
    auto* ws = static_cast<float*>(cuda::workspace(s_.device));
    const uint64_t pairs_max = uint64_t(s_.chunk * s_.nu);
    float* yg = ws;
    float* yu = yg + pairs_max * s_.n_ff;
    float* yd = yu + pairs_max * s_.n_ff;
    const uint64_t floats = (2 * pairs_max * s_.n_ff + pairs_max * s_.n_embd) * 4;
    auto* mapped = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(ws) + (floats + 255) / 256 * 256);
    void* scratch = reinterpret_cast<uint8_t*>(ws) + (floats + pairs_max * 4 + 511) / 256 * 256;
    for (int64_t t0 = 0; t0 < x.rows; t0 += s_.chunk) {
      const int64_t nt = std::min(s_.chunk, x.rows - t0), np = nt * s_.nu;
      const int32_t* id = ids.i32() + t0 * s_.nu;
      if (s_.slots) {
        cuda::launch(cuda::map_expert_slots, unsigned(cuda::ceil_div(np, 256)), 256, 0, s, id, np, s_.slots, s_.n_slots,
                     mapped);
        cuda::check_launch("cuda.moe_experts (expert slots)", a.queue);
        id = mapped;
      }
      if (s_.glu) {
        // The norm's rounding of x, where one chunk holds the step (decode).
        cuda::RoundedRows pre;
        if (s_.pre_act && nt == x.rows) pre = cuda::rounded_rows(a.in[3].data, a.in[3].max_rows, x.cols, s_.pre_act);
        s_.gate.run_experts_glu(s_.up, x.row(t0), x.cols, nt, id, np, s_.nu, yg, s_.n_ff, scratch, a.queue,
                                pre.q ? &pre : nullptr);
      } else {
        s_.gate.run_experts(x.row(t0), x.cols, nt, id, np, s_.nu, yg, s_.n_ff, scratch, a.queue);
        s_.up.run_experts(x.row(t0), x.cols, nt, id, np, s_.nu, yu, s_.n_ff, scratch, a.queue);
        const int64_t nh = np * s_.n_ff;
        cuda::launch(cuda::swiglu_kernel, unsigned(cuda::ceil_div(nh, 256)), 256, 0, s, yg, yu, nh, yg);
        cuda::check_launch("cuda.moe_experts (swiglu)", a.queue);
      }
      s_.down.run_experts(yg, s_.n_ff, np, id, np, 1, yd, s_.n_embd, scratch, a.queue);
      cuda::launch(cuda::combine_experts, cuda::combine_grid(s_.n_embd, nt), 256, 0, s, yd, wts.f32() + t0 * s_.nu,
                   int(s_.nu), s_.n_embd, y.row(t0));
      cuda::check_launch("cuda.moe_experts (combine)", a.queue);
    }
  }
  std::string_view impl() const override { return s_.gate.impl(1); }

  std::unique_ptr<Kernel> grouped_;  // for steps of kGroupedMinRows and more (null: none that long)

 private:
  bool grouped(const CallArgs& a) const { return grouped_ && a.in[0].rows >= kGroupedMinRows; }
  Setup s_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_moe_gate(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") || !b.arity(1, 2, 1, 2)) return nullptr;
  ref::MoeRouting r;
  if (!bind_moe_gate(b, s, &r)) return nullptr;
  b.check(r.n_expert <= 32 * cuda::kMaxExpertsPerLane && r.n_used <= 32 && r.n_group <= 32,
          "the GPU router takes at most 512 experts, 32 used, 32 groups");
  if (!b.ok()) return nullptr;
  const int gating = r.gating == ref::MoeGating::Sigmoid ? 2 : 1;
  cuda::MatmulOp op;
  if (!op.init(s.weights[0], s.in[0].max_rows, s.rounding, error)) return nullptr;
  const cuda::RouteArgs ra{int(r.n_expert), int(r.n_used),   int(gating),         int(r.n_group),
                           int(r.topk_group), r.norm_weights, r.weights_scale};
  auto k = std::make_unique<CudaMoeGate>(s.device, op, ra, r, s.weights.size() > 1);
  k->max_rows = s.in[0].max_rows;
  const uint64_t bytes = uint64_t((k->n_logit_floats() + 63) / 64 * 64) * 4 + op.scratch_bytes();
  if (!cuda::reserve_workspace(s.device, bytes, error)) return nullptr;
  return k;
}

std::unique_ptr<Kernel> make_cuda_moe_experts(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device")) return nullptr;
  if (b.i("streamed", 0) != 0) return make_cuda_moe_experts_streamed(s, error);
  MoeExpertsShape shape;
  if (!bind_moe_experts(b, s, &shape, s.in.size() > 3 ? 1 : 0)) return nullptr;
  const int pre_act = bind_rounded_rows(b, s, 3);
  const int64_t n_embd = shape.n_embd, n_ff = shape.n_ff;
  const std::vector<int64_t>& slots = shape.slots;
  b.check(b.ints("choices").empty(), "choices (expert deferral) is a CPU experts' param");
  if (!b.ok()) return nullptr;
  CudaMoeExperts::Setup st;
  st.device = s.device;
  st.n_embd = n_embd;
  st.n_ff = n_ff;
  st.nu = s.in[1].cols;
  const uint64_t per_token = uint64_t(st.nu) * (2 * n_ff + n_embd) * 4 + uint64_t(st.nu) * n_ff * 2 + n_embd * 2;
  st.chunk = std::max<int64_t>(1, std::min<int64_t>(s.in[0].max_rows, int64_t((64ull << 20) / per_token)));
  st.chunk = std::min<int64_t>(st.chunk, 65535 / std::max<int64_t>(1, st.nu));
  if (!st.gate.init(s.weights[0], st.chunk, s.rounding, error, true) ||
      !st.up.init(s.weights[1], st.chunk, s.rounding, error, true) ||
      !st.down.init(s.weights[2], st.chunk * st.nu, s.rounding, error, true))
    return nullptr;
  st.glu = st.gate.glu_pair(st.up);
  st.pre_act = pre_act;
  if (!cuda::reserve_workspace(s.device, CudaMoeExperts::scratch_bytes(st), error)) return nullptr;
  if (!slots.empty()) {
    // Bound once, read by every step: a plain synchronous upload.
    std::vector<int32_t> host(slots.begin(), slots.end());
    cuda::use_device(s.device);
    cudaError_t rc = cudaMalloc(&st.slots, host.size() * 4);
    if (rc == cudaSuccess) rc = cudaMemcpy(st.slots, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
    if (rc != cudaSuccess) {
      if (st.slots) cudaFree(st.slots);
      *error = "expert_slots: " + cuda::error_text(int(rc));
      return nullptr;
    }
    st.n_slots = int(host.size());
  }
  auto k = std::make_unique<CudaMoeExperts>(st);
  if (s.in[0].max_rows >= CudaMoeExperts::kGroupedMinRows) {
    k->grouped_ = make_cuda_moe_experts_grouped(s, error);
    if (!k->grouped_) return nullptr;
  }
  return k;
}

}  // namespace kt::kern
